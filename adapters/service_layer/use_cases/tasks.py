"""Use cases of a task: plan it in its run; and the task as it stands."""

from __future__ import annotations

from ....domain import task as task_aggregate
from ....domain.kernel.errors import NotFound
from ...world.clock import Clock
from ..kernel.appended import Appended, record
from ..kernel.ledger import Ledger
from .runs import load_run
from ....domain.kernel.codes import Code

__all__ = ["load_task", "plan_task"]


def load_task(ledger: Ledger, task_id: str) -> task_aggregate.Task:
    task = ledger.get(task_aggregate.apply, task_aggregate.stream_of(task_id))
    if task is None:
        raise NotFound(Code.TASK_NOT_FOUND, f"no task {task_id}")
    return task


def plan_task(ledger: Ledger, clock: Clock, run_id: str, task_id: str, title: str, *,
              prompt_sha256: str | None = None, prompt_chars: int = 0) -> Appended:
    return record(ledger, clock, lambda now: task_aggregate.plan(
        ledger.get(task_aggregate.apply, task_aggregate.stream_of(task_id)),
        load_run(ledger, run_id), task_id, title, now, prompt_sha256=prompt_sha256, prompt_chars=prompt_chars))
