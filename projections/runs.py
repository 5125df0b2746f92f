"""Read model: one row per run, with its status, base commit and budget use.

Every schema-valid event projects, in any order: the first RunOpened of a run
wins, an event about a run with no row changes nothing, and used time never
goes negative nor past MAX_SAFE_INT.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..domain.values import MAX_SAFE_INT, to_ms
from .query import as_dicts

TABLE = "runs"
COLUMNS = {
    "run_id": str, "goal": str, "target_branch": str, "budget_ms": int, "status": str,
    "base_commit": str, "base_intent": str, "failure_code": str, "failure_message": str,
    "opened_at": str, "closed_at": str, "used_ms": int, "active_since": str, "position": int,
}
INDEXES = ("status",)
PK = "run_id"


def _opened(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "INSERT OR IGNORE INTO runs (run_id, goal, target_branch, budget_ms, status, opened_at, used_ms, active_since, position) "
        "VALUES (?, ?, ?, ?, 'opening', ?, 0, ?, ?)",
        (p["run_id"], p["goal"], p["target_branch"], p["budget_ms"], at, at, position),
    )


def _base_requested(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE runs SET base_intent = ?, position = ? WHERE run_id = ?", (p["intent_id"], position, p["run_id"]))


def _base_pinned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "UPDATE runs SET base_commit = ?, status = CASE status WHEN 'opening' THEN 'active' ELSE status END, "
        "position = ? WHERE run_id = ?",
        (p["commit"], position, p["run_id"]),
    )


def _stop_clock(c: sqlite3.Connection, run_id: str, at: str, status: str, position: int, closed: bool) -> None:
    row = c.execute("SELECT used_ms, active_since FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return
    used, active_since = row
    spent = max(0, to_ms(at) - to_ms(active_since)) if active_since else 0
    c.execute(
        "UPDATE runs SET status = ?, used_ms = ?, active_since = NULL, "
        "closed_at = CASE WHEN ? THEN ? ELSE closed_at END, position = ? WHERE run_id = ?",
        (status, min(MAX_SAFE_INT, used + spent), closed, at, position, run_id),
    )


def _base_failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "failed", position, True)
    c.execute("UPDATE runs SET failure_code = ?, failure_message = ? WHERE run_id = ?",
              (p["code"], p["message"], p["run_id"]))


def _paused(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "paused", position, False)


def _resumed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE runs SET status = 'active', active_since = ?, position = ? WHERE run_id = ?",
              (at, position, p["run_id"]))


def _aborted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "aborted", position, True)


def _completed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "completed", position, True)


HANDLERS = {
    "RunOpened.v1": _opened,
    "RunBasePinRequested.v1": _base_requested,
    "RunBasePinned.v1": _base_pinned,
    "RunBasePinFailed.v1": _base_failed,
    "RunPaused.v1": _paused,
    "RunResumed.v1": _resumed,
    "RunAborted.v1": _aborted,
    "RunCompleted.v1": _completed,
}


def with_budget(row: dict[str, Any], now: str) -> dict[str, Any]:
    """Add used and remaining budget as of now (the open interval counts up to now)."""
    used = row["used_ms"] + (max(0, to_ms(now) - to_ms(row["active_since"])) if row["active_since"] else 0)
    row = dict(row, used_ms=used)
    row["remaining_ms"] = None if row["budget_ms"] is None else max(0, row["budget_ms"] - used)
    return row


def list_runs(c: sqlite3.Connection) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM runs ORDER BY opened_at, run_id"))


def get_run(c: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    rows = as_dicts(c.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)))
    return rows[0] if rows else None
