"""What is known of a worker generation's process: alive, dead, unknown, elsewhere (another host's), or none.

What a lease's reclaim and a handoff's confirmation must know, observed through
the process port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....domain import lease as lease_aggregate
from ....domain import worker as worker_aggregate
from .ledger import Ledger

if TYPE_CHECKING:
    from ....domain.containment.processes import ProcessIdentity
    from .ports import ProcessPort

__all__ = ["elsewhere", "holder_liveness", "process_liveness"]


def process_liveness(processes: ProcessPort, worker: worker_aggregate.Worker) -> str:
    """What is known of the current generation's process: alive, dead, unknown, or none (it never had one)."""
    if worker.status == "launching":
        return "unknown"  # a launch is pending: a process may be starting
    if worker.status != "running" or worker.process is None:
        return "dead" if worker.status == "exited" else "none"
    return processes.liveness(worker.process)


def holder_liveness(ledger: Ledger, processes: ProcessPort, lease: lease_aggregate.Lease | None) -> str:
    """The liveness of the process of the generation holding lease: what a reclaim must know."""
    if lease is None or lease.status != "held":
        return "none"
    holder = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(lease.worker_id))
    if holder is None:
        return "none"
    if holder.generation != lease.generation:
        return "dead"  # a relaunch needs the old generation's process positively gone
    if holder.status == "running" and holder.process is not None and elsewhere(processes, holder.process):
        return "elsewhere"
    return process_liveness(processes, holder)


def elsewhere(processes: ProcessPort, identity: ProcessIdentity) -> bool:
    """Whether the process is another host's (DOCKET_HOST): never looked at from here, reclaimed by expiry."""
    return identity.host != processes.this_host()[0]
