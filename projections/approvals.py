"""Read model: one row per approval (ApprovalRecorded): who approved which candidates of a run, and when.

Also what an approval is for: each task's latest candidate with a confirmed
handoff, in task order (the candidates ``docket approve`` approves and the
integration merges), and which of them no approval covers yet.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from . import candidates, tasks
from .query import as_dicts

TABLE = "approvals"
COLUMNS = {"position": int, "run_id": str, "by": str, "recorded_at": str, "candidates": int, "binding_ids": str,
           "task_ids": str}
INDEXES = ("run_id",)
PK = "position"


def _recorded(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    approved = p["candidates"]
    c.execute("INSERT OR IGNORE INTO approvals (position, run_id, [by], recorded_at, candidates, binding_ids, "
              "task_ids) VALUES (?, ?, ?, ?, ?, ?, ?)",
              (position, p["run_id"], p["by"], at, len(approved),
               canonical_json(sorted({a["binding_id"] for a in approved})).decode(),
               canonical_json([a["task_id"] for a in approved]).decode()))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.ApprovalRecorded: _recorded}


def approvals_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The run's approvals in the order they were recorded, binding_ids and task_ids as lists."""
    rows = as_dicts(c.execute("SELECT * FROM approvals WHERE run_id = ? ORDER BY position", (run_id,)))
    return [{**row, "binding_ids": json.loads(row["binding_ids"]), "task_ids": json.loads(row["task_ids"])}
            for row in rows]


def confirmed_candidates(c: sqlite3.Connection, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
    """Each task's latest candidate whose handoff is confirmed and whose pin holds, in task order (of one task, with
    task_id): the step the integration would make of the task."""
    latest: dict[str, dict[str, Any]] = {}
    for row in candidates.candidates_of(c, run_id, task_id):  # in position order: the last one wins
        if row["handoff"] == "confirmed" and row["status"] == "pinned":
            latest[row["task_id"]] = row
    return [latest[t["task_id"]] for t in tasks.tasks_of(c, run_id) if t["task_id"] in latest]


def awaiting_approval(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The confirmed candidates (as confirmed_candidates) that no approval of the run names yet."""
    approved = {binding for row in approvals_of(c, run_id) for binding in row["binding_ids"]}
    return [row for row in confirmed_candidates(c, run_id) if row["binding_id"] not in approved]
