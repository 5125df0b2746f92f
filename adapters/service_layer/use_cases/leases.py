"""Use cases of leases: grant, renew, release, expire.

A held lease is reclaimed only by the liveness rules of ``domain.lease.grant``.
An action refused for a fenced generation or with a stale token leaves a record
(WorkerActionRefused) on the worker's stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ....domain import lease as lease_aggregate
from ....domain.kernel.errors import Fenced, Refused
from ....domain.events import Event, LeaseGranted
from ...world.clock import Clock
from ..kernel.appended import Appended, record
from ..kernel.ledger import Ledger
from ..kernel.liveness import holder_liveness
from .runs import load_run
from .worker_generations import load_worker, record_refusal
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..kernel.ports import ProcessPort

__all__ = ["driver_resource", "expire_lease", "grant_lease", "release_lease", "renew_lease", "worktree_resource"]



def driver_resource(run_id: str) -> str:
    """The resource a run's driver (the one supervisor that drives it) is leased as."""
    return f"driver/{run_id}"


def worktree_resource(run_id: str, task_id: str) -> str:
    """The resource a task's worktree is leased as."""
    return f"worktree/{run_id}/{task_id}"


def _load_lease(ledger: Ledger, resource: str) -> lease_aggregate.Lease | None:
    return ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(resource))


def grant_lease(ledger: Ledger, clock: Clock, resource: str, worker_id: str, generation: int,
                ttl_ms: int, processes: ProcessPort | None = None) -> Appended:
    """Grant the lease; a held one is reclaimed only by the liveness rules of domain.lease.grant.

    ``processes`` (the process port) observes the holder's process when it has one.
    A grant for a fenced generation is refused, and the refusal recorded.
    """
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
        return record(ledger, clock, decision)


def _processes(processes: ProcessPort | None) -> ProcessPort:
    if processes is not None:
        return processes
    from ..kernel.ports import real_ports

    return real_ports().processes  # imported only if a holder's process must be observed


@contextmanager
def _refusals_recorded(ledger: Ledger, clock: Clock, worker_id: str | None, generation: int | None,
                       action: str) -> Iterator[None]:
    """An action refused for a fenced generation or a stale token leaves a record (WorkerActionRefused)."""
    try:
        yield
    except Fenced as e:
        if worker_id is not None and generation is not None:
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
            raise Refused(Code.LEASE_NOT_HELD, f"{resource} has never been leased")
        holder = load_worker(ledger, lease.worker_id)
        return lease_aggregate.renew(lease, holder, resource, token, ttl_ms, now)

    try:
        return record(ledger, clock, decision)
    except Fenced as e:
        _record_refusal_for_token(ledger, clock, resource, token, "lease-renew", e)
        raise


def release_lease(ledger: Ledger, clock: Clock, resource: str, token: int) -> Appended:
    try:
        return record(ledger, clock,
                       lambda now: lease_aggregate.release(_load_lease(ledger, resource), resource, token, now))
    except Fenced as e:
        _record_refusal_for_token(ledger, clock, resource, token, "lease-release", e)
        raise


def _record_refusal_for_token(ledger: Ledger, clock: Clock, resource: str, token: int, action: str,
                              error: Refused) -> None:
    worker_id, generation = _holder_of_token(ledger, resource, token)
    if worker_id is not None and generation is not None:
        record_refusal(ledger, clock, worker_id, generation, action, error)


def expire_lease(ledger: Ledger, clock: Clock, resource: str) -> Appended:
    return record(ledger, clock, lambda now: lease_aggregate.expire(_load_lease(ledger, resource), resource, now))
