"""Read model: one row per run, with its status, base commit, budget use and limits on its agents' reported use.

Every schema-valid event projects, in any order: the first RunOpened of a run
wins, and an event about a run with no row changes nothing. Budget use follows
the same rule as the Run aggregate (domain.budget): ``used_ms`` holds the closed
active intervals, ``active_since`` the start of the open one; the clock runs
while the run is active and supervised.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..domain import budget
from .query import as_dicts

TABLE = "runs"
COLUMNS = {
    "run_id": str, "goal": str, "target_branch": str, "budget_ms": int, "status": str,
    "base_commit": str, "failure_code": str, "failure_message": str,
    "opened_at": str, "closed_at": str, "used_ms": int, "active_since": str, "position": int,
    "supervisions": str,  # JSON list of the supervision ids open now
    "plan": str,  # JSON of the RunPlanned of a run `docket go` supervises
    "waiting_code": str, "waiting_message": str,  # RunWaiting's, until the run is supervised again
    "max_cost_micro_usd": int, "max_tokens": int,  # RunOpened.v2's limits (NULL: none)
    "limited_by": str,  # what made it budget-limited: time (RunBudgetExhausted), cost or tokens (RunUsageExhausted)
}
INDEXES = ("status",)
PK = "run_id"


def _opened(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "INSERT OR IGNORE INTO runs (run_id, goal, target_branch, budget_ms, status, opened_at, used_ms, supervisions, "
        "position, max_cost_micro_usd, max_tokens) VALUES (?, ?, ?, ?, 'opening', ?, 0, '[]', ?, ?, ?)",
        (p["run_id"], p["goal"], p["target_branch"], p["budget_ms"], at, position, p.get("max_cost_micro_usd"),
         p.get("max_tokens")),
    )


def _clock(c: sqlite3.Connection, run_id: str, at: str, position: int, *, status: str | None = None,
           closed: bool = False, supervisions: list[str] | None = None, ended_at: str | None = None) -> None:
    """Set what changed, then run or stop the budget's clock as domain.budget.clock says (as the aggregate does)."""
    row = c.execute("SELECT status, used_ms, active_since, supervisions FROM runs WHERE run_id = ?",
                    (run_id,)).fetchone()
    if row is None:
        return
    status = status or row[0]
    supervisions = json.loads(row[3]) if supervisions is None else supervisions
    used, since = budget.clock(row[1], row[2], status == "active" and bool(supervisions), at, ended_at=ended_at)
    c.execute(
        "UPDATE runs SET status = ?, used_ms = ?, active_since = ?, supervisions = ?, "
        "closed_at = CASE WHEN ? THEN ? ELSE closed_at END, position = ? WHERE run_id = ?",
        (status, used, since, json.dumps(supervisions), closed, at, position, run_id),
    )


def _supervisions(c: sqlite3.Connection, run_id: str) -> list[str] | None:
    row = c.execute("SELECT supervisions FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else json.loads(row[0])


def _base_pinned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE runs SET base_commit = ?, status = CASE status WHEN 'opening' THEN 'active' ELSE status END "
              "WHERE run_id = ?", (p["commit"], p["run_id"]))
    _clock(c, p["run_id"], at, position)


def _base_failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="failed", closed=True)
    c.execute("UPDATE runs SET failure_code = ?, failure_message = ? WHERE run_id = ?",
              (p["code"], p["message"], p["run_id"]))


def _paused(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="paused")


def _resumed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="active")


def _aborted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="aborted", closed=True)


def _completed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="completed", closed=True)


def _budget_exhausted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="budget-limited", closed=True)
    c.execute("UPDATE runs SET limited_by = 'time' WHERE run_id = ?", (p["run_id"],))


def _usage_exhausted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _clock(c, p["run_id"], at, position, status="budget-limited", closed=True)
    c.execute("UPDATE runs SET limited_by = ? WHERE run_id = ?", (p["limit"], p["run_id"]))


def _planned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    plan = {"tasks": p["tasks"], "agent": p["agent"], "cycles": p["cycles"], "parallel": p["parallel"]}
    if "export_key" in p:  # RunPlanned.v2
        plan["export_key"] = p["export_key"]
    c.execute("UPDATE runs SET plan = ? WHERE run_id = ?", (json.dumps(plan, sort_keys=True), p["run_id"]))


def _task_added(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    row = c.execute("SELECT plan FROM runs WHERE run_id = ?", (p["run_id"],)).fetchone()
    if row is None or row[0] is None:
        return
    plan = json.loads(row[0])
    plan["tasks"] = [*plan["tasks"], p["task"]]
    plan["added"] = plan.get("added", 0) + 1
    c.execute("UPDATE runs SET plan = ? WHERE run_id = ?", (json.dumps(plan, sort_keys=True), p["run_id"]))


def _supervised(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    current = _supervisions(c, p["run_id"])
    if current is not None and p["supervision_id"] not in current:
        _clock(c, p["run_id"], at, position, supervisions=[*current, p["supervision_id"]])
        c.execute("UPDATE runs SET waiting_code = NULL, waiting_message = NULL WHERE run_id = ?", (p["run_id"],))


def _waiting(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE runs SET waiting_code = ?, waiting_message = ? WHERE run_id = ?",
              (p["code"], p["message"], p["run_id"]))


def _unsupervised(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    current = _supervisions(c, p["run_id"])
    if current is not None:
        _clock(c, p["run_id"], at, position, supervisions=[s for s in current if s != p["supervision_id"]],
               ended_at=p["ended_at"])


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {
        ev.stored.RunOpened: _opened,
        ev.stored.RunOpenedV2: _opened,
        ev.stored.RunBasePinned: _base_pinned,
        ev.stored.RunBasePinFailed: _base_failed,
        ev.stored.RunPaused: _paused,
        ev.stored.RunResumed: _resumed,
        ev.stored.RunAborted: _aborted,
        ev.stored.RunCompleted: _completed,
        ev.stored.RunSupervised: _supervised,
        ev.stored.RunUnsupervised: _unsupervised,
        ev.stored.RunBudgetExhausted: _budget_exhausted,
        ev.stored.RunUsageExhausted: _usage_exhausted,
        ev.stored.RunPlanned: _planned,
        ev.stored.RunWaiting: _waiting,
        ev.stored.RunPlannedV2: _planned,
        ev.stored.RunTaskAdded: _task_added,
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
