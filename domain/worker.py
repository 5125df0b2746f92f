"""The Worker aggregate: one agent process slot, with a generation.

A worker registers at generation 1. A relaunch raises the generation and fences
the old one: anything the old generation holds or asks for is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import events as ev
from .aggregate import next_event
from .errors import Refused
from .run import Run, require_open
from .streams import worker_stream as stream_of

__all__ = ["Worker", "apply", "register", "relaunch", "require_current", "stream_of"]


@dataclass(frozen=True)
class Worker:
    worker_id: str
    run_id: str
    role: str
    task_id: str | None
    generation: int
    version: int


def apply(worker: Worker | None, event: ev.Event, position: int) -> Worker:
    if isinstance(event, ev.WorkerRegistered):
        return Worker(event.worker_id, event.run_id, event.role, event.task_id, 1, event.version)
    assert worker is not None
    if isinstance(event, ev.WorkerRelaunched):
        return Worker(worker.worker_id, worker.run_id, worker.role, worker.task_id, event.generation, event.version)
    raise TypeError(f"Worker cannot apply {event.type_name()}")


def register(existing: Worker | None, run: Run, worker_id: str, role: str,
             task_run_id: str | None, task_id: str | None, now: str) -> ev.Event:
    if existing is not None:
        raise Refused("worker-exists", f"worker {worker_id} is already registered in run {existing.run_id}")
    require_open(run)
    if task_id is not None and task_run_id != run.run_id:
        raise Refused("task-not-in-run", f"task {task_id} does not belong to run {run.run_id}")
    return next_event(ev.WorkerRegistered, stream_of(worker_id), 0, now, worker_id=worker_id,
                      run_id=run.run_id, role=role, generation=1, task_id=task_id)


def relaunch(worker: Worker, run: Run, now: str) -> ev.Event:
    require_open(run)
    return next_event(ev.WorkerRelaunched, stream_of(worker.worker_id), worker.version, now,
                      worker_id=worker.worker_id, run_id=worker.run_id,
                      generation=worker.generation + 1, fenced_generation=worker.generation)


def require_current(worker: Worker, generation: int) -> None:
    if generation > worker.generation:
        raise Refused(
            "unknown-generation",
            f"worker {worker.worker_id} has no generation {generation}; its current generation is {worker.generation}",
        )
    if generation < worker.generation:
        raise Refused(
            "stale-generation",
            f"worker {worker.worker_id} generation {generation} is fenced; the current generation is {worker.generation}",
        )
