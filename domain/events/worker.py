"""Events of the Worker aggregate (stream ``worker:<worker_id>``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..values import MAX_SAFE_INT
from .base import Event, Generation, Id

__all__ = ["WorkerRegistered", "WorkerRelaunched"]


class WorkerRegistered(Event):
    """A worker (one agent in its own worktree) joins a run at generation 1."""

    name = "WorkerRegistered"
    worker_id: Id
    run_id: Id
    role: Id
    generation: Literal[1]
    task_id: Id | None


class WorkerRelaunched(Event):
    """A worker is relaunched: its generation rises and the old one is fenced."""

    name = "WorkerRelaunched"
    worker_id: Id
    run_id: Id
    generation: Annotated[int, Field(ge=2, le=MAX_SAFE_INT)]
    fenced_generation: Generation
