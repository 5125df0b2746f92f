"""Speculative verification (``[integration] speculate = N``): up to N verifications of a queue in flight at once.

The steps of a queue that goes on are merged one on top of the other onto the integration ref as they come (up to
``batch × speculate`` merged and not verified: ``window``), so step k's merge already holds every step ahead of
it. The open merges are cut into ranges of up to ``batch`` steps, in order, as verification slots free up (never
waiting for a range to fill: what piled up while every slot was busy is batched); each range's required checks run on
the merge of its last step (IntegrationVerificationStarted, naming the head it was built on and the steps ahead it
assumed) while the ranges ahead are still being checked. Verdicts are recorded in queue order only, for the range
at the head (``Integration.probe``), so a result that came early waits for the ones ahead and then stands as it
is, with no check run again. A range whose steps, or steps it assumed, were dropped or queued again, or that was
built on a batch known to fail, is cancelled (``stale``): what it covered is merged again onto the new head and
checked there. While a failing batch is bisected, only its probe runs, and none once it is the failing step alone
(the failed batch check ran on its merge: ``Integration.known_to_fail``).

Pure: the service layer (adapters/service_layer/merge_queue/speculation.py) runs the checks and records these.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import events as ev
from ..aggregate import next_event
from ..kernel.codes import Code
from ..kernel.streams import integration_stream as stream_of
from .integration_state import DROPPED, Integration, StepState, Verification

__all__ = ["Range", "cancel", "stale", "start", "to_start", "window"]


@dataclass(frozen=True)
class Range:
    """Steps first..last (numbers), checked together on the merge of the last."""

    first: int
    last: int


def window(batch: int, speculate: int) -> int:
    """How many merged steps may wait for their verdict at once: speculate ranges of up to batch steps."""
    return max(1, batch) * max(1, speculate)


def to_start(integration: Integration, *, batch: int, speculate: int) -> list[Range]:
    """The ranges whose verification starts now, in order: after the last one running, the open merges cut into
    ranges of up to batch steps, while fewer than speculate run. A range never waits to fill: a step merged while a
    verification slot is free is checked at once, and batches form from the steps that piled up while every slot
    was busy (batching where it pays: when checks are the bottleneck). While a failing batch is bisected: its probe
    alone, once."""
    merged = integration.open_batch()
    if not merged or not integration.rolling:
        return []
    running = integration.running()
    if integration.failing is not None:
        probe = integration.probe()
        if integration.known_to_fail(probe):
            return []  # the failing step alone, whose merge the failed batch check ran on: its verdict is known
        wanted = Range(probe[0].step, probe[-1].step)
        started = any(Range(v.first, v.last) == wanted for v in running)
        return [] if started else [wanted]
    after = max((v.last for v in running), default=merged[0].step - 1)
    rest = [s for s in merged if s.step > after]
    ranges: list[Range] = []
    while rest and len(running) + len(ranges) < speculate:
        chunk = rest[:max(1, batch)]
        ranges.append(Range(chunk[0].step, chunk[-1].step))
        rest = rest[len(chunk):]
    return ranges


def stale(integration: Integration) -> list[tuple[Verification, StepState, str]]:
    """The running verifications whose result can no longer be used, each with the step that made it so and why:
    one of its own steps, or of the steps it assumed, was dropped (conflicted, rejected) or queued again; or it was
    built on a batch whose merge is known to fail (being bisected), so everything it covers is queued again."""
    found = []
    for v in integration.running():
        ahead = [integration.step(n) for n in v.assumed]
        covered = [integration.step(n) for n in range(v.first, v.last + 1)]
        # the cause first (a step dropped ahead of it or in it), else what followed from it (a step queued again)
        gone = (next((s for s in ahead + covered if s.status in DROPPED), None)
                or next((s for s in ahead + covered if s.status not in ("merged", "verified")), None)
                or next((s for s in covered if s.status != "merged"), None))
        if gone is not None:
            why = "requeued" if gone.status == "requeued" else "dropped"
            found.append((v, gone, why))
        elif integration.failing is not None and v.first > integration.failing:
            found.append((v, integration.step(integration.failing), "failing"))
    return found


def start(integration: Integration, scope: Range, *, verification_binding: str, merge_commit: str, tree: str,
          now: str) -> list[ev.Event]:
    """IntegrationVerificationStarted of the range (pinned as verification_binding); nothing when it runs already
    or is no longer one ``to_start`` could give (another pass decided meanwhile)."""
    if any(v.binding_id == verification_binding for v in integration.running()):
        return []
    numbers = {s.step for s in integration.open_batch()}
    if not all(n in numbers for n in range(scope.first, scope.last + 1)):
        return []
    if any(not (v.last < scope.first or v.first > scope.last) for v in integration.running()):
        return []
    first = integration.step(scope.first)
    head = first.merged_onto or first.head  # its merge's first parent (the ref may have named a rejected merge)
    assert head is not None
    ahead = sorted(n for n in numbers if n < scope.first)
    return [next_event(ev.IntegrationVerificationStarted, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, first_step=scope.first, last_step=scope.last,
                       tasks=[integration.step(n).task_id for n in range(scope.first, scope.last + 1)],
                       head=head, merge_commit=merge_commit, tree=tree, assumed=ahead,
                       verification_binding=verification_binding)]


_WHY = {"requeued": "was queued again", "dropped": "was dropped", "failing": "is in a batch whose merge fails"}


def cancel(integration: Integration, now: str) -> list[ev.Event]:
    """IntegrationVerificationCancelled of each stale verification (``stale``); nothing when none is."""
    events: list[ev.Event] = []
    version = integration.version
    for v, step, why in stale(integration):
        message = (f"the check of steps {v.first}..{v.last} was built on step {step.step} (task {step.task_id}), "
                   f"which {_WHY[why]} ({step.status}); what it covers is checked again on the new head")
        events.append(next_event(ev.IntegrationVerificationCancelled, stream_of(integration.run_id), version, now,
                                 run_id=integration.run_id, first_step=v.first, last_step=v.last,
                                 verification_binding=v.binding_id, because_of=step.step,
                                 reason=Code.SPECULATION_CANCELLED, message=message))
        version += 1
    return events
