"""Use cases: load the aggregates, let the domain decide, append the events.

Each decision reads its aggregates inside Ledger.decide, that is inside the
ledger's write transaction, and is given the ledger's time (never earlier than
the last recorded event): what it read cannot change before it is appended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...domain import lease as lease_aggregate
from ...domain import run as run_aggregate
from ...domain import task as task_aggregate
from ...domain import worker as worker_aggregate
from ...domain.codes import Code
from ...domain.errors import Fenced, NotFound, OutcomeUnknown, Refused
from ...domain.events import Event, LeaseGranted
from ..world import faults
from ..world.clock import Clock
from .ledger import Ledger

if TYPE_CHECKING:
    from .effector import Effector

__all__ = [
    "Appended",
    "abort_run",
    "complete_run",
    "expire_lease",
    "grant_lease",
    "load_run",
    "load_task",
    "load_worker",
    "open_run",
    "pause_run",
    "plan_task",
    "register_worker",
    "relaunch_worker",
    "release_lease",
    "renew_lease",
    "resume_run",
]


@dataclass(frozen=True)
class Appended:
    """What a command recorded: each event with its ledger position."""

    events: list[tuple[int, Event]]

    @property
    def last(self) -> tuple[int, Event]:
        return self.events[-1]


def _append(ledger: Ledger, clock: Clock, decision: Callable[[str], Event | list[Event]]) -> Appended:
    return Appended(ledger.decide(decision, clock.now()))


def load_run(ledger: Ledger, run_id: str) -> run_aggregate.Run:
    run = ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id))
    if run is None:
        raise NotFound("run-not-found", f"no run {run_id}")
    return run


def load_worker(ledger: Ledger, worker_id: str) -> worker_aggregate.Worker:
    worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
    if worker is None:
        raise NotFound("worker-not-found", f"no worker {worker_id}")
    return worker


def load_task(ledger: Ledger, task_id: str) -> task_aggregate.Task:
    task = ledger.get(task_aggregate.apply, task_aggregate.stream_of(task_id))
    if task is None:
        raise NotFound("task-not-found", f"no task {task_id}")
    return task


def open_run(ledger: Ledger, clock: Clock, *, run_id: str, intent_id: str, goal: str, target_branch: str,
             budget_ms: int | None, repository: str, wait: bool = True,
             effector: Effector | None = None) -> run_aggregate.Run:
    """Record the run and its base-pin intent; with wait, drive that intent to its outcome. The run as it then stands.

    Raises NotFound (unknown-branch) or Refused when the base could not be pinned,
    and OutcomeUnknown when, waiting, the pin's outcome is not known yet.
    """
    def decision(now: str) -> list[Event]:
        if ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id)) is not None:
            raise Refused("run-exists", f"run {run_id} already exists")
        return run_aggregate.open_run(run_id, intent_id, goal, target_branch, budget_ms, repository, now)

    intent_position, _ = _append(ledger, clock, decision).last
    faults.crash_point("run-open:after-intent")
    if wait:  # its own intent, found by its position: another's unknown holds it not back
        if effector is None:
            from .effector import Effector

            effector = Effector(ledger, clock)
        effector.run_pending(only={intent_id}, after=intent_position - 1)
    run = load_run(ledger, run_id)
    if run.status == "failed":
        failed = NotFound if run.failure_code == Code.UNKNOWN_BRANCH else Refused
        raise failed(run.failure_code or "base-pin-failed", run.failure_message or "the base could not be pinned")
    if wait and intent_id in run.pending_intents:
        raise OutcomeUnknown("outcome-unknown", f"run {run_id} is recorded but its base pin is not known yet; "
                                                "'docket replay --apply' observes again")
    return run


def pause_run(ledger: Ledger, clock: Clock, run_id: str, reason: str | None) -> Appended:
    return _append(ledger, clock, lambda now: run_aggregate.pause(load_run(ledger, run_id), reason, now))


def resume_run(ledger: Ledger, clock: Clock, run_id: str) -> Appended:
    return _append(ledger, clock, lambda now: run_aggregate.resume(load_run(ledger, run_id), now))


def abort_run(ledger: Ledger, clock: Clock, run_id: str, reason: str) -> Appended:
    return _append(ledger, clock, lambda now: run_aggregate.abort(load_run(ledger, run_id), reason, now))


def complete_run(ledger: Ledger, clock: Clock, run_id: str) -> Appended:
    return _append(ledger, clock, lambda now: run_aggregate.complete(load_run(ledger, run_id), now))


def plan_task(ledger: Ledger, clock: Clock, run_id: str, task_id: str, title: str, *,
              prompt_sha256: str | None = None, prompt_chars: int = 0) -> Appended:
    return _append(ledger, clock, lambda now: task_aggregate.plan(
        ledger.get(task_aggregate.apply, task_aggregate.stream_of(task_id)),
        load_run(ledger, run_id), task_id, title, now, prompt_sha256=prompt_sha256, prompt_chars=prompt_chars))


def register_worker(ledger: Ledger, clock: Clock, run_id: str, worker_id: str, role: str,
                    task_id: str | None) -> Appended:
    def decision(now: str) -> Event:
        task = load_task(ledger, task_id) if task_id is not None else None
        existing = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
        return worker_aggregate.register(existing, load_run(ledger, run_id), worker_id, role,
                                         task.run_id if task else None, task_id, now)

    return _append(ledger, clock, decision)


def relaunch_worker(ledger: Ledger, clock: Clock, worker_id: str) -> Appended:
    def decision(now: str) -> Event:
        worker = load_worker(ledger, worker_id)
        return worker_aggregate.relaunch(worker, load_run(ledger, worker.run_id), now)

    return _append(ledger, clock, decision)


def _load_lease(ledger: Ledger, resource: str) -> lease_aggregate.Lease | None:
    return ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(resource))


def grant_lease(ledger: Ledger, clock: Clock, resource: str, worker_id: str, generation: int,
                ttl_ms: int, processes: Any = None) -> Appended:
    """Grant the lease; a held one is reclaimed only by the liveness rules of domain.lease.grant.

    ``processes`` (the process port) observes the holder's process when it has one.
    A grant for a fenced generation is refused, and the refusal recorded.
    """
    from .workers import holder_liveness

    def decision(now: str) -> Event:
        current = _load_lease(ledger, resource)
        # observed inside the write transaction: the holder cannot change between the look and the grant
        liveness = holder_liveness(ledger, _processes(processes), current)
        worker = load_worker(ledger, worker_id)
        holder = None
        if current is not None:
            holder = worker if current.worker_id == worker_id else load_worker(ledger, current.worker_id)
        return lease_aggregate.grant(current, holder, worker, generation, load_run(ledger, worker.run_id),
                                     resource, ttl_ms, now, liveness)

    with _refusals_recorded(ledger, clock, worker_id, generation, "lease-grant"):
        return _append(ledger, clock, decision)


def _processes(processes: Any) -> Any:
    if processes is not None:
        return processes
    from .ports import real_ports

    return real_ports().processes  # imported only if a holder's process must be observed


@contextmanager
def _refusals_recorded(ledger: Ledger, clock: Clock, worker_id: str | None, generation: int | None,
                       action: str) -> Iterator[None]:
    """An action refused for a fenced generation or a stale token leaves a record (WorkerActionRefused)."""
    try:
        yield
    except Fenced as e:
        if worker_id is not None and generation is not None:
            from .workers import record_refusal

            record_refusal(ledger, clock, worker_id, generation, action, e)
        raise


def _holder_of_token(ledger: Ledger, resource: str, token: int) -> tuple[str | None, int | None]:
    """The worker and generation a lease token was granted to (None, None if it names no grant of resource)."""
    for position, event in ledger.history(lease_aggregate.stream_of(resource)):
        if position == token and isinstance(event, LeaseGranted):
            return event.worker_id, event.generation
    return None, None


def renew_lease(ledger: Ledger, clock: Clock, resource: str, token: int, ttl_ms: int) -> Appended:
    def decision(now: str) -> Event:
        lease = _load_lease(ledger, resource)
        if lease is None:
            raise Refused("lease-not-held", f"{resource} has never been leased")
        holder = load_worker(ledger, lease.worker_id)
        return lease_aggregate.renew(lease, holder, resource, token, ttl_ms, now)

    try:
        return _append(ledger, clock, decision)
    except Fenced as e:
        _record_refusal_for_token(ledger, clock, resource, token, "lease-renew", e)
        raise


def release_lease(ledger: Ledger, clock: Clock, resource: str, token: int) -> Appended:
    try:
        return _append(ledger, clock,
                       lambda now: lease_aggregate.release(_load_lease(ledger, resource), resource, token, now))
    except Fenced as e:
        _record_refusal_for_token(ledger, clock, resource, token, "lease-release", e)
        raise


def _record_refusal_for_token(ledger: Ledger, clock: Clock, resource: str, token: int, action: str,
                              error: Refused) -> None:
    worker_id, generation = _holder_of_token(ledger, resource, token)
    if worker_id is not None and generation is not None:
        from .workers import record_refusal

        record_refusal(ledger, clock, worker_id, generation, action, error)


def expire_lease(ledger: Ledger, clock: Clock, resource: str) -> Appended:
    return _append(ledger, clock, lambda now: lease_aggregate.expire(_load_lease(ledger, resource), resource, now))
