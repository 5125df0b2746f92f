"""Read model: one row per planned task (the first TaskPlanned of a task id wins)."""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "tasks"
COLUMNS = {"task_id": str, "run_id": str, "title": str, "planned_at": str, "position": int}
INDEXES = ("run_id",)
PK = "task_id"


def _planned(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("INSERT OR IGNORE INTO tasks (task_id, run_id, title, planned_at, position) VALUES (?, ?, ?, ?, ?)",
              (p["task_id"], p["run_id"], p["title"], at, position))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.TaskPlanned.type_name(): _planned}


def tasks_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM tasks WHERE run_id = ? ORDER BY position", (run_id,)))
