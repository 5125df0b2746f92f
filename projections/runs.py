"""Read model: one row per run, with its status, base commit and budget use.

Every schema-valid event projects, in any order: the first RunOpened of a run
wins, and an event about a run with no row changes nothing. Budget use follows
the same rule as the Run aggregate (domain.budget): ``used_ms`` holds the closed
active intervals, ``active_since`` the start of the open one.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..domain import budget
from .query import as_dicts

TABLE = "runs"
COLUMNS = {
    "run_id": str, "goal": str, "target_branch": str, "budget_ms": int, "status": str,
    "base_commit": str, "failure_code": str, "failure_message": str,
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


def _base_pinned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "UPDATE runs SET base_commit = ?, status = CASE status WHEN 'opening' THEN 'active' ELSE status END, "
        "position = ? WHERE run_id = ?",
        (p["commit"], position, p["run_id"]),
    )


def _used_until(c: sqlite3.Connection, run_id: str, at: str) -> int | None:
    """The run's budget use with its open interval closed at ``at``; None if the run has no row."""
    row = c.execute("SELECT used_ms, active_since FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else budget.used_ms(row[0], row[1], at)


def _stop_clock(c: sqlite3.Connection, run_id: str, at: str, status: str, position: int, closed: bool) -> None:
    used = _used_until(c, run_id, at)
    if used is None:
        return
    c.execute(
        "UPDATE runs SET status = ?, used_ms = ?, active_since = NULL, "
        "closed_at = CASE WHEN ? THEN ? ELSE closed_at END, position = ? WHERE run_id = ?",
        (status, used, closed, at, position, run_id),
    )


def _base_failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "failed", position, True)
    c.execute("UPDATE runs SET failure_code = ?, failure_message = ? WHERE run_id = ?",
              (p["code"], p["message"], p["run_id"]))


def _paused(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "paused", position, False)


def _resumed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    used = _used_until(c, p["run_id"], at)
    if used is None:
        return
    c.execute("UPDATE runs SET status = 'active', used_ms = ?, active_since = ?, position = ? WHERE run_id = ?",
              (used, at, position, p["run_id"]))


def _aborted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "aborted", position, True)


def _completed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _stop_clock(c, p["run_id"], at, "completed", position, True)


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {
        ev.RunOpened.type_name(): _opened,
        ev.RunBasePinned.type_name(): _base_pinned,
        ev.RunBasePinFailed.type_name(): _base_failed,
        ev.RunPaused.type_name(): _paused,
        ev.RunResumed.type_name(): _resumed,
        ev.RunAborted.type_name(): _aborted,
        ev.RunCompleted.type_name(): _completed,
    }


def with_budget(row: dict[str, Any], now: str) -> dict[str, Any]:
    """Add used and remaining budget as of now (the open interval counts up to now)."""
    used = budget.used_ms(row["used_ms"], row["active_since"], now)
    return dict(row, used_ms=used, remaining_ms=budget.remaining_ms(row["budget_ms"], used))


def list_runs(c: sqlite3.Connection) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM runs ORDER BY opened_at, run_id"))


def get_run(c: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    rows = as_dicts(c.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)))
    return rows[0] if rows else None
