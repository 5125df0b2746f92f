"""Read model: one row per check run (one attempt of one named check against a candidate), with its execution.

``status``: requested, running (its process was launched), then its one result:
passed, failed or timed-out (the first result recorded wins). A launch that
failed leaves it requested: the check run is ended by the CheckFailed recorded
for it. ``execution_state`` follows the execution worktree: requested, ready or
failed, then removing and removed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "checks"
COLUMNS = {"check_id": str, "binding_id": str, "run_id": str, "task_id": str, "check": str, "attempt": int,
           "config_sha256": str, "required": int, "status": str, "code": str, "exit_code": int, "signal": int,
           "execution": str, "execution_state": str, "pid": int, "duration_ms": int, "output_sha256": str,
           "tail_line": str, "artifacts": int, "requested_at": str, "ended_at": str, "position": int}
INDEXES = ("binding_id", "run_id")
PK = "check_id"


def _requested(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("INSERT OR IGNORE INTO checks (check_id, binding_id, run_id, task_id, [check], attempt, config_sha256, "
              "required, status, execution, execution_state, requested_at, position) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'requested', ?, 'requested', ?, ?)",
              (p["check_id"], p["binding_id"], p["run_id"], p["task_id"], p["check"], p["attempt"],
               p["config_sha256"], int(p["required"]), p["execution"], at, position))


def _launched(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE checks SET status = 'running', pid = ? WHERE check_id = ? AND status = 'requested'",
              (p["process"]["pid"], p["check_id"]))


def _result(status: str):  # noqa: ANN202
    def handler(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
        lines = [line for line in p["tail"].splitlines() if line.strip()]
        c.execute("UPDATE checks SET status = ?, code = ?, exit_code = ?, signal = ?, duration_ms = ?, "
                  "output_sha256 = ?, tail_line = ?, artifacts = ?, ended_at = ? "
                  "WHERE check_id = ? AND status IN ('requested', 'running')",
                  (status, p.get("code", p.get("cause")), p.get("exit_code"), p.get("signal"), p["duration_ms"],
                   p["output_sha256"], lines[-1][:200] if lines else None, len(p["artifacts"]), at,
                   p["check_id"]))
    return handler


def _execution(state: str):  # noqa: ANN202
    def handler(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
        c.execute("UPDATE checks SET execution_state = ? WHERE check_id = ?", (state, p["check_id"]))
    return handler


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.CheckRequested: _requested, ev.stored.CheckLaunched: _launched,
            ev.stored.CheckPassed: _result("passed"), ev.stored.CheckFailed: _result("failed"),
            ev.stored.CheckTimedOut: _result("timed-out"),
            ev.stored.ExecutionCreated: _execution("ready"), ev.stored.ExecutionFailed: _execution("failed"),
            ev.stored.ExecutionRemovalRequested: _execution("removing"),
            ev.stored.ExecutionRemoved: _execution("removed")}


def checks_of(c: sqlite3.Connection, binding_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM checks WHERE binding_id = ? ORDER BY position", (binding_id,)))


def checks_of_run(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM checks WHERE run_id = ? ORDER BY position", (run_id,)))


def base_checks_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The last result of each check on the run's base (its candidate has the run's id for a task id), by name."""
    rows = as_dicts(c.execute("SELECT * FROM checks WHERE run_id = ? AND task_id = ? AND status IN "
                              "('passed', 'failed', 'timed-out') ORDER BY position", (run_id, run_id)))
    return sorted({row["check"]: row for row in rows}.values(), key=lambda row: row["check"])


def live_executions(c: sqlite3.Connection) -> list[dict[str, Any]]:
    """Check runs whose execution worktree may exist: every one not recorded as removed."""
    return as_dicts(c.execute("SELECT * FROM checks WHERE execution_state != 'removed' ORDER BY position"))


def executions(c: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every check run with its execution's path and state: the execution worktrees the ledger owns, ever."""
    return as_dicts(c.execute("SELECT * FROM checks ORDER BY position"))


def unfinished(c: sqlite3.Connection) -> list[dict[str, Any]]:
    """Check runs with no result yet, or whose execution is not removed yet: what a crash may have left."""
    return as_dicts(c.execute("SELECT * FROM checks WHERE status IN ('requested', 'running') "
                              "OR execution_state IN ('requested', 'ready') ORDER BY position"))
