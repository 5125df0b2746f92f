"""Read model: what each worker generation's agent reported it used, and from it the spend of a run and its tasks.

One row per (worker, generation) that reported, kept by domain.usage's rule: of a generation's reports, each metric
its largest (a metric no report stated stays NULL). A run's spend, and a task's (its workers' generations), is the
sum over its generations. Every schema-valid event projects, in any order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from ..domain import usage as usage_rules
from .query import as_dicts

TABLE = "usage"
COLUMNS = {"worker_id": str, "generation": int, "run_id": str, "input_tokens": int, "output_tokens": int,
           "cost_micro_usd": int, "reports": int, "position": int}
INDEXES = ("run_id",)
PK = ("worker_id", "generation")

_METRICS = ("input_tokens", "output_tokens", "cost_micro_usd")


def _reported(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    key = (p["worker_id"], p["generation"])
    row = c.execute("SELECT input_tokens, output_tokens, cost_micro_usd FROM usage "
                    "WHERE worker_id = ? AND generation = ?", key).fetchone()
    now = usage_rules.of_report(usage_rules.Usage(*(p[m] for m in _METRICS)))
    if row is None:
        c.execute("INSERT INTO usage (worker_id, generation, run_id, input_tokens, output_tokens, cost_micro_usd, "
                  "reports, position) VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
                  (*key, p["run_id"], now.input_tokens, now.output_tokens, now.cost_micro_usd, position))
        return
    kept = usage_rules.Usage(*row).at_least(now)
    c.execute("UPDATE usage SET input_tokens = ?, output_tokens = ?, cost_micro_usd = ?, reports = reports + 1, "
              "position = ? WHERE worker_id = ? AND generation = ?",
              (kept.input_tokens, kept.output_tokens, kept.cost_micro_usd, position, *key))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {getattr(ev.stored, name): _reported for name in usage_rules.REPORT_TYPES}


def _spend(usage: usage_rules.Usage, reports: int) -> dict[str, Any]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "tokens": usage.tokens,
            "cost_micro_usd": usage.cost_micro_usd, "reports": reports}


NO_SPEND: dict[str, Any] = _spend(usage_rules.Usage(), 0)


def _summed(rows: list[dict[str, Any]]) -> tuple[usage_rules.Usage, int]:
    total = usage_rules.Usage()
    for row in rows:
        total = total.plus(usage_rules.Usage(*(row[m] for m in _METRICS)))
    return total, sum(row["reports"] for row in rows)


def spend_of_run(c: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The run's spend: input_tokens, output_tokens, tokens, cost_micro_usd (each None when no report stated it) and
    how many reports it is made of."""
    return _spend(*_summed(as_dicts(c.execute("SELECT * FROM usage WHERE run_id = ?", (run_id,)))))


def spend_by_task(c: sqlite3.Connection, run_id: str, task_of: Mapping[str, str | None]) -> dict[str, dict[str, Any]]:
    """Each task's spend in the run (as spend_of_run), for the tasks whose workers reported any; task_of: worker id
    -> its task (the workers read model's)."""
    tasks: dict[str, list[dict[str, Any]]] = {}
    for row in as_dicts(c.execute("SELECT * FROM usage WHERE run_id = ? ORDER BY position", (run_id,))):
        task_id = task_of.get(row["worker_id"])
        if task_id is not None:
            tasks.setdefault(task_id, []).append(row)
    return {task_id: _spend(*_summed(task_rows)) for task_id, task_rows in tasks.items()}
