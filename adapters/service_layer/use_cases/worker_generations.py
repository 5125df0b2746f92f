"""Use cases of a worker's generations: registered at generation 1, relaunched at the next (fencing the last), and
an action refused for a fenced generation recorded (WorkerActionRefused).

The launch of a generation's agent, its stop and its exit are in ``workers``.
"""

from __future__ import annotations

from ....domain import worker as worker_aggregate
from ....domain.kernel.errors import NotFound, Refused
from ....domain.events import Event
from ...world.clock import Clock
from ..kernel.appended import Appended, record
from ..kernel.ledger import Ledger
from .runs import load_run
from .tasks import load_task
from ....domain.kernel.codes import Code

__all__ = ["load_worker", "record_refusal", "register_worker", "relaunch_worker"]


def load_worker(ledger: Ledger, worker_id: str) -> worker_aggregate.Worker:
    worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
    if worker is None:
        raise NotFound(Code.WORKER_NOT_FOUND, f"no worker {worker_id}")
    return worker


def register_worker(ledger: Ledger, clock: Clock, run_id: str, worker_id: str, role: str,
                    task_id: str | None) -> Appended:
    def decision(now: str) -> Event:
        task = load_task(ledger, task_id) if task_id is not None else None
        existing = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
        return worker_aggregate.register(existing, load_run(ledger, run_id), worker_id, role,
                                         task.run_id if task else None, task_id, now)

    return record(ledger, clock, decision)


def relaunch_worker(ledger: Ledger, clock: Clock, worker_id: str) -> Appended:
    def decision(now: str) -> Event:
        worker = load_worker(ledger, worker_id)
        return worker_aggregate.relaunch(worker, load_run(ledger, worker.run_id), now)

    return record(ledger, clock, decision)


def record_refusal(ledger: Ledger, clock: Clock, worker_id: str, generation: int, action: str,
                   error: Refused) -> None:
    """Record that an action for a fenced generation (or with a stale token) was refused."""
    def decision(now: str) -> list[Event]:
        worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
        if worker is None:
            return []
        return [worker_aggregate.refused(worker, generation, action, error, now)]

    ledger.decide(decision, clock.now())
