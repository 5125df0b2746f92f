"""Read model: one row per worker, with its current generation (the first registration of an id wins)."""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "workers"
COLUMNS = {"worker_id": str, "run_id": str, "role": str, "task_id": str, "generation": int,
           "registered_at": str, "relaunched_at": str, "position": int}
INDEXES = ("run_id",)
PK = "worker_id"


def _registered(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "INSERT OR IGNORE INTO workers (worker_id, run_id, role, task_id, generation, registered_at, position) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (p["worker_id"], p["run_id"], p["role"], p["task_id"], p["generation"], at, position),
    )


def _relaunched(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE workers SET generation = ?, relaunched_at = ?, position = ? WHERE worker_id = ?",
              (p["generation"], at, position, p["worker_id"]))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.WorkerRegistered.type_name(): _registered, ev.WorkerRelaunched.type_name(): _relaunched}


def workers_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM workers WHERE run_id = ? ORDER BY position", (run_id,)))
