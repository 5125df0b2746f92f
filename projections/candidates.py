"""Read model: one row per candidate (binding id), with its pin and its release.

The first pin request of a binding id makes the row; a pin requested again
after a release starts it over (pinning, keeping its first position). ``status``
follows the Candidate aggregate: pinning, pinned, diverged, releasing, released.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "candidates"
COLUMNS = {"binding_id": str, "run_id": str, "task_id": str, "worker_id": str, "generation": int,
           "boundary": str, "ref": str, "parent": str, "tree": str, "base": str, "commit": str,
           "changed_count": int, "changed_paths": str, "worktree": str, "repository": str, "status": str,
           "found": str, "requested_at": str, "pinned_at": str, "released_at": str, "position": int,
           "handoff": str, "handoff_code": str}
INDEXES = ("run_id", "commit")
PK = "binding_id"

_REQUESTED = ("worker_id", "generation", "boundary", "ref", "parent", "tree", "base", "worktree", "repository")


def _pin_requested(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    values = {"binding_id": p["binding_id"], "run_id": p["run_id"], "task_id": p["task_id"],
              **{k: p[k] for k in _REQUESTED}, "changed_count": len(p["changed_paths"]),
              "changed_paths": canonical_json(p["changed_paths"]).decode(), "status": "pinning",
              "requested_at": at, "position": position}
    renewed = (*_REQUESTED, "changed_count", "changed_paths", "status", "requested_at")
    c.execute(f"INSERT INTO candidates ({', '.join(f'[{k}]' for k in values)}) "
              f"VALUES ({', '.join('?' * len(values))}) ON CONFLICT (binding_id) DO UPDATE SET "
              f"{', '.join(f'[{k}] = excluded.[{k}]' for k in renewed)}, [commit] = NULL, found = NULL, "
              "pinned_at = NULL, released_at = NULL WHERE status = 'released'",  # pinned again after a release
              tuple(values.values()))


def _pinned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE candidates SET status = 'pinned', [commit] = ?, pinned_at = ? WHERE binding_id = ?",
              (p["commit"], at, p["binding_id"]))


def _diverged(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE candidates SET status = 'diverged', found = ? WHERE binding_id = ?",
              (p["found"], p["binding_id"]))


def _status(status: str, stamp: str | None = None):  # noqa: ANN202
    also = f", {stamp} = ?" if stamp else ""

    def handler(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
        c.execute(f"UPDATE candidates SET status = ?{also} WHERE binding_id = ?",
                  (status, at, p["binding_id"]) if stamp else (status, p["binding_id"]))
    return handler


def _handoff(state: str):  # noqa: ANN202
    def handler(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
        c.execute("UPDATE candidates SET handoff = ?, handoff_code = ? WHERE binding_id = ?",
                  (state, p.get("code"), p["binding_id"]))
    return handler


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.CandidatePinRequested: _pin_requested,
            ev.stored.CandidatePinRequestedV2: _pin_requested, ev.stored.CandidatePinned: _pinned,
            ev.stored.CandidateDiverged: _diverged,
            ev.stored.CandidateReleaseRequested: _status("releasing"),
            ev.stored.CandidateReleased: _status("released", "released_at"),
            ev.stored.CandidateReleaseFailed: _status("pinned"),
            ev.stored.HandoffOffered: _handoff("offered"), ev.stored.HandoffConfirmed: _handoff("confirmed"),
            ev.stored.HandoffRejected: _handoff("rejected")}


def candidates_of(c: sqlite3.Connection, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
    if task_id is None:
        return as_dicts(c.execute("SELECT * FROM candidates WHERE run_id = ? ORDER BY position", (run_id,)))
    return as_dicts(c.execute("SELECT * FROM candidates WHERE run_id = ? AND task_id = ? ORDER BY position",
                              (run_id, task_id)))


def candidate_row(c: sqlite3.Connection, binding_id: str) -> dict[str, Any] | None:
    rows = as_dicts(c.execute("SELECT * FROM candidates WHERE binding_id = ?", (binding_id,)))
    return rows[0] if rows else None


def matching(c: sqlite3.Connection, key: str) -> list[dict[str, Any]]:
    """Candidates whose binding id or commit starts with key (lower-case hex), in position order."""
    if not key or any(ch not in "0123456789abcdef" for ch in key):
        return []
    end = key + "g"  # every lower-case hex string that starts with key sorts in [key, key + "g")
    return as_dicts(c.execute(
        "SELECT * FROM candidates WHERE (binding_id >= ? AND binding_id < ?) OR ([commit] >= ? AND [commit] < ?) "
        "ORDER BY position", (key, end, key, end)))


def all_candidates(c: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every candidate of every run, in the order their pins were first asked for."""
    return as_dicts(c.execute("SELECT * FROM candidates ORDER BY position"))
