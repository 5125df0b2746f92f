"""The Task aggregate: one unit of work planned inside an open run."""

from __future__ import annotations

from dataclasses import dataclass

from . import events as ev
from .aggregate import next_event
from .errors import Refused
from .run import Run, require_open
from .streams import task_stream as stream_of

__all__ = ["Task", "apply", "plan", "stream_of"]


@dataclass(frozen=True)
class Task:
    task_id: str
    run_id: str
    title: str
    version: int


def apply(task: Task | None, event: ev.Event, position: int) -> Task:
    if isinstance(event, ev.TaskPlanned):
        return Task(event.task_id, event.run_id, event.title, event.version)
    raise TypeError(f"Task cannot apply {event.type_name()}")


def plan(existing: Task | None, run: Run, task_id: str, title: str, now: str) -> ev.Event:
    if existing is not None:
        raise Refused("task-exists", f"task {task_id} is already planned in run {existing.run_id}")
    require_open(run)
    return next_event(ev.TaskPlanned, stream_of(task_id), 0, now, task_id=task_id, run_id=run.run_id, title=title)
