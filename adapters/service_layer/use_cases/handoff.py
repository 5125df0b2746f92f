"""Use cases of handoff: a worker offers its candidate; docket confirms it only when the world says it holds.

Confirmation observes, then decides inside the ledger's write transaction: the
liveness of the generation's process, the worktree's lease, the candidate's ref
(it must still name the pinned commit), and the runs of every required check
under its current configuration. The first condition that fails is recorded as
HandoffRejected with its code; a later confirmation may succeed once it holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ....domain import candidate as candidate_aggregate
from ....domain import handoff as candidate_handoff
from ....domain import lease as lease_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.errors import Refused, StaleGeneration
from ....domain.events import Event
from ...world import faults
from ...world.clock import Clock
from .candidates import load_candidate
from .leases import worktree_resource
from ..kernel.ledger import Ledger
from ..kernel.liveness import process_liveness
from .runs import load_run
from .worker_generations import record_refusal
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["confirm_handoff", "last_rejection", "offer_handoff"]


def offer_handoff(ledger: Ledger, clock: Clock, binding: str) -> candidate_aggregate.Candidate:
    """HandoffOffered by the generation that made the candidate (refused, and recorded, for a fenced one)."""
    candidate = load_candidate(ledger, binding)
    worker = _worker(ledger, candidate)

    def decision(now: str) -> list[Event]:
        current = load_candidate(ledger, binding)
        return candidate_handoff.offer_handoff(current, None if worker is None else _generation(ledger, worker),
                                               load_run(ledger, current.run_id), now)

    try:
        ledger.decide(decision, clock.now())
    except StaleGeneration as e:
        if worker is not None and candidate.generation is not None:
            record_refusal(ledger, clock, worker.worker_id, candidate.generation, "handoff-offer", e)
        raise
    return load_candidate(ledger, binding)


def confirm_handoff(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str,
                    required: dict[str, str]) -> candidate_aggregate.Candidate:
    """HandoffConfirmed or HandoffRejected, from what is observed now; the candidate after."""
    candidate = load_candidate(ledger, binding)
    worker = _worker(ledger, candidate)
    if worker is None:
        raise Refused(Code.NO_WORKER, f"candidate {binding} was not made by a worker")
    processes = effector.ports.processes
    pin = effector.ports.candidate_refs.observe_candidate(Path(candidate.repository), candidate.ref,
                                                          candidate.parent, candidate.tree)
    faults.crash_point("handoff:after-observe")

    def decision(now: str) -> list[Event]:
        current = load_candidate(ledger, binding)
        holder = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker.worker_id))
        assert holder is not None
        process = "dead" if holder.generation != current.generation else process_liveness(processes, holder)
        lease = ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(
            worktree_resource(current.run_id, current.task_id)))
        held_by = lease.generation if lease is not None and lease.status == "held" \
            and lease.worker_id == worker.worker_id else None
        return candidate_handoff.confirm_handoff(current, worker_generation=holder.generation, process=process,
                                                 lease_held_by=held_by, pin=pin, required=required, now=now)

    ledger.decide(decision, clock.now())
    return load_candidate(ledger, binding)


def _worker(ledger: Ledger, candidate: candidate_aggregate.Candidate) -> worker_aggregate.Worker | None:
    if candidate.worker_id is None:
        return None
    return ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(candidate.worker_id))


def _generation(ledger: Ledger, worker: worker_aggregate.Worker) -> int:
    current = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker.worker_id))
    return worker.generation if current is None else current.generation


def last_rejection(ledger: Ledger, binding: str) -> str:
    """The message of the candidate's last HandoffRejected."""
    from ....domain.events import HandoffRejected

    for _, event in reversed(ledger.history(candidate_aggregate.stream_of(binding))):
        if isinstance(event, HandoffRejected):
            return event.message
    return "the handoff was not confirmed"
