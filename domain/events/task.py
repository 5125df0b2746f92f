"""Events of the Task aggregate (stream ``task:<task_id>``)."""

from __future__ import annotations

from .base import Event, Id, Text

__all__ = ["TaskPlanned"]


class TaskPlanned(Event):
    """A unit of work is planned inside a run."""

    name = "TaskPlanned"
    task_id: Id
    run_id: Id
    title: Text
