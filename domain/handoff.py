"""A candidate's handoff: offered by the worker generation that made it, confirmed once that worker is gone.

HandoffOffered, then HandoffConfirmed when every condition holds (the generation
is current, its process positively gone, its lease released, the pin unchanged,
every required check passed under its current configuration), else
HandoffRejected naming the first that fails. They are events of the candidate's
stream, folded in ``candidate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import events as ev
from .aggregate import next_event
from .candidate import Candidate
from .kernel.errors import Refused, StaleGeneration
from .run import Run, require_open
from .kernel.streams import candidate_stream as stream_of
from .kernel.codes import Code

if TYPE_CHECKING:
    from .effects import CandidateRefObservation

__all__ = ["confirm_handoff", "offer_handoff"]


def offer_handoff(candidate: Candidate, worker_generation: int | None, run: Run, now: str) -> list[ev.Event]:
    """HandoffOffered by the generation that made the candidate; nothing if it is offered or confirmed already.

    Refused ``stale-generation`` when that generation is fenced (the worker was relaunched since).
    """
    require_open(run)
    if candidate.status != "pinned" or candidate.commit is None:
        raise Refused(Code.CANDIDATE_NOT_PINNED, f"candidate {candidate.binding_id} is {candidate.status}; only a "
                                              "pinned candidate is handed off")
    if candidate.worker_id is None or candidate.generation is None:
        raise Refused(Code.NO_WORKER, f"candidate {candidate.binding_id} was not made by a worker; a worker hands off "
                                   "what it made")
    if worker_generation != candidate.generation:
        raise StaleGeneration(f"candidate {candidate.binding_id} was made by generation "
                              f"{candidate.generation} of worker {candidate.worker_id}, which is fenced "
                              f"(the current generation is {worker_generation})")
    if candidate.handoff in ("offered", "confirmed"):
        return []
    return [next_event(ev.HandoffOffered, stream_of(candidate.binding_id), candidate.version, now,
                       run_id=candidate.run_id, task_id=candidate.task_id, binding_id=candidate.binding_id,
                       worker_id=candidate.worker_id, generation=candidate.generation, commit=candidate.commit)]


def confirm_handoff(candidate: Candidate, *, worker_generation: int, process: str, lease_held_by: int | None,
                    pin: CandidateRefObservation, required: dict[str, str], now: str) -> list[ev.Event]:
    """HandoffConfirmed when every condition holds, else HandoffRejected naming the first that fails.

    process: the liveness of the generation's process (dead or none: positively gone); lease_held_by: the
    generation holding the worktree's lease unexpired, None when it is released; pin: the candidate's ref now;
    required: each required check's name and the digest of its current configuration.
    Nothing when the handoff is confirmed already.
    """
    if candidate.handoff == "confirmed":
        return []
    if candidate.handoff not in ("offered", "rejected"):
        raise Refused(Code.HANDOFF_NOT_OFFERED, f"candidate {candidate.binding_id} was not offered "
                                             f"('docket handoff offer {candidate.binding_id[:12]}')")
    assert candidate.worker_id is not None and candidate.generation is not None and candidate.commit is not None
    stream = stream_of(candidate.binding_id)
    common = dict(run_id=candidate.run_id, task_id=candidate.task_id, binding_id=candidate.binding_id)

    def rejected(code: str, message: str) -> list[ev.Event]:
        return [next_event(ev.HandoffRejected, stream, candidate.version, now, **common, code=code,
                           message=message[:4000])]

    if worker_generation != candidate.generation:
        return rejected("stale-generation", f"generation {candidate.generation} of worker {candidate.worker_id} is "
                                            f"fenced (the current generation is {worker_generation})")
    if process not in ("dead", "none"):
        return rejected("worker-alive", f"the process of worker {candidate.worker_id} generation "
                                        f"{candidate.generation} is {process}, not positively gone")
    if lease_held_by is not None and lease_held_by >= candidate.generation:
        return rejected("lease-held", f"worker {candidate.worker_id} generation {lease_held_by} still holds the "
                                      "worktree's lease")
    if pin.state != "matching" or pin.commit != candidate.commit:
        return rejected("pin-changed", f"{candidate.ref} no longer names {candidate.commit}: "
                                       f"{pin.state}{' (' + pin.detail + ')' if pin.detail else ''}")
    bindings = []
    for name, digest in sorted(required.items()):
        runs = [r for r in candidate.checks if r.check == name and r.config_sha256 == digest]
        if not runs:
            stale = any(r.check == name for r in candidate.checks)
            return rejected("check-config-changed" if stale else "check-missing",
                            f"required check {name} has "
                            f"{'no run under its current configuration' if stale else 'not run'} on this candidate "
                            f"('docket check run {candidate.binding_id[:12]} --check {name}')")
        last = runs[-1]
        if last.result != "passed":
            return rejected("check-failed", f"required check {name}, attempt {last.attempt}, "
                                            f"{last.result or 'has no result'}"
                                            + (f" ({last.result_code})" if last.result_code else ""))
        bindings.append(ev.CheckBinding(check=name, check_id=last.check_id, config_sha256=digest,
                                        output_sha256=last.output_sha256))
    return [next_event(ev.HandoffConfirmed, stream, candidate.version, now, **common, worker_id=candidate.worker_id,
                       generation=candidate.generation, commit=candidate.commit, checks=bindings)]
