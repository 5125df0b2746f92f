"""Read model: one row per planned task (the first TaskPlanned of a task id wins), with its worktree."""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "tasks"
COLUMNS = {"task_id": str, "run_id": str, "title": str, "planned_at": str, "position": int,
           "prompt_sha256": str, "worktree": str, "branch": str, "worktree_failure": str,
           "worktree_removed": str, "result": str, "cycles": int, "passed_candidate": str,
           "finished_code": str, "failed_cycles": int, "judged_generation": int}
INDEXES = ("run_id",)
PK = "task_id"


def _planned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("INSERT OR IGNORE INTO tasks (task_id, run_id, title, planned_at, position, prompt_sha256) "
              "VALUES (?, ?, ?, ?, ?, ?)",
              (p["task_id"], p["run_id"], p["title"], at, position, p.get("prompt_sha256")))


def _worktree_created(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET worktree = ?, branch = ?, worktree_failure = NULL WHERE task_id = ?",
              (p["path"], p["branch"], p["task_id"]))


def _worktree_failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET worktree_failure = ? WHERE task_id = ? AND worktree IS NULL",
              (p["code"], p["task_id"]))


def _worktree_removed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET worktree = NULL, branch = NULL, worktree_removed = ? WHERE task_id = ?",
              (p["path"], p["task_id"]))


def _worktree_lost(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET worktree = NULL, branch = NULL WHERE task_id = ?", (p["task_id"],))


def _feedback(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET failed_cycles = COALESCE(failed_cycles, 0) + 1, judged_generation = ? "
              "WHERE task_id = ?", (p["generation"], p["task_id"]))


def _answered(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET judged_generation = ? WHERE task_id = ?", (p["generation"], p["task_id"]))


def _finished(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE tasks SET result = ?, cycles = ?, passed_candidate = ?, finished_code = ? "
              "WHERE task_id = ? AND result IS NULL",
              (p["result"], p["cycles"], p["binding_id"], p["code"], p["task_id"]))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.TaskPlanned: _planned, ev.stored.TaskPlannedV2: _planned,
            ev.stored.WorktreeCreated: _worktree_created, ev.stored.WorktreeFailed: _worktree_failed,
            ev.stored.WorktreeRemoved: _worktree_removed, ev.stored.WorktreeLost: _worktree_lost,
            ev.stored.TaskFeedbackRecorded: _feedback, ev.stored.TaskAnswered: _answered,
            ev.stored.TaskFinished: _finished}


def tasks_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM tasks WHERE run_id = ? ORDER BY position", (run_id,)))


def tasks_with_worktrees(c: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every task whose worktree exists as far as the ledger knows, in plan order."""
    return as_dicts(c.execute("SELECT * FROM tasks WHERE worktree IS NOT NULL ORDER BY position"))


def all_tasks(c: sqlite3.Connection) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM tasks ORDER BY position"))
