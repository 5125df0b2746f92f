"""Taking a task over from a host that stopped renewing its leases.

A task's generations run only on the host that has its worktree (``workers``
refuses a launch elsewhere with worktree-elsewhere). When that host stops
renewing (a machine that died, or was cut off from the ledger) and its lease on
the worktree has expired, the docket driving the run gives that host's
generation up, unjudged (WorkerLost: its work is on that host), and the
worktree with it (WorktreeLost), so the task's next generation makes a worktree
here, within the task's cycles. The caller holds the run's driver lease: the
host it took that lease from launches nothing more in the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....domain import lease as lease_aggregate
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.events import Event
from ...world.clock import Clock
from .leases import driver_resource, worktree_resource
from ..kernel.ledger import Ledger
from .runs import load_run
from .tasks import load_task

if TYPE_CHECKING:
    from ....domain.run import Run

__all__ = ["drives_here", "take_over", "worktree_host"]


def worktree_host(task: task_aggregate.Task, worker: worker_aggregate.Worker | None) -> str | None:
    """The host that has the task's worktree (or its pending intent): the one it was asked for on, else, for a
    worktree asked for before hosts were recorded, the host of its last generation's process (None: unknown)."""
    if task.worktree is None and task.worktree_intent is None:
        return None
    if task.worktree_host is not None:
        return task.worktree_host
    if worker is not None and worker.process is not None:
        return worker.process.host
    return None


def drives_here(ledger: Ledger, run: Run, here: str) -> bool:
    """Whether the run's driver lease is held by a supervision of this host. A driver learns that another took its
    lease over only when it renews (every third of the lease): until then, what it would decide across hosts is
    asked of this first, so that two drivers never take each other's tasks over."""
    driver = ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(driver_resource(run.run_id)))
    if driver is None or driver.status != "held":
        return False
    holder = next((s for s in run.supervisions if s.supervision_id == driver.worker_id), None)
    return holder is not None and holder.supervisor.host == here


def take_over(ledger: Ledger, clock: Clock, here: str, task_id: str, worker_id: str, *, unjudged: bool) -> bool:
    """Give up the task's worktree and its generation there when they are on another host whose lease on the
    worktree is no longer renewed (expired, released, or never granted); whether anything was recorded.
    ``unjudged``: the generation ended but its work was not judged yet (it is given up with its worktree)."""
    task = load_task(ledger, task_id)
    worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
    host = worktree_host(task, worker)
    if host is None or host == here or (worker is not None and worker.status == "launching"):
        return False  # here, or unknown; a pending launch is settled by its gate first (never opened from here)

    def decision(now: str) -> list[Event]:
        current = load_task(ledger, task_id)
        holder = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
        if worktree_host(current, holder) != host or (holder is not None and holder.status == "launching"):
            return []
        lease = ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(worktree_resource(task.run_id, task_id)))
        if lease is not None and lease.status == "held" and not lease.is_expired(now):
            return []  # its host still renews it
        run = load_run(ledger, current.run_id)
        if not drives_here(ledger, run, here):
            return []  # its driver lease was taken over meanwhile (a clock ahead elsewhere): that driver decides
        expired_at = lease.expires_at if lease is not None else None
        reason = (f"its worktree is on host {host}, which stopped renewing its leases"
                  + (f" (its lease on the worktree expired at {expired_at})" if expired_at else ""))
        events: list[Event] = []
        if holder is not None and (holder.status == "running" or (holder.status == "exited" and unjudged)):
            events += worker_aggregate.lose(holder, run, holder.generation, host=host, lease_expired_at=expired_at,
                                            now=now)
        events += task_aggregate.lose_worktree(current, run, host, reason, now)
        return events

    return bool(ledger.decide(decision, clock.now()))
