"""The Integration aggregate's state: its steps, approvals and required checks, and how each event folds into it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from .. import events as ev
from ..kernel.codes import Code

__all__ = [
    "Approval",
    "Verification",
    "Integration",
    "RequiredCheckState",
    "StepState",
    "apply",
]


StepStatus = Literal["waiting", "merging", "merged", "verified", "conflicted", "failed", "rejected", "requeued"]
IntegrationStatus = Literal["unprepared", "open", "merging", "verifying", "updating-target", "completed",
                            "stopped"]
_STOPPING = ("conflicted", "failed", "rejected")
DROPPED = ("conflicted", "rejected")  # in a queue that goes on: settled, the queue goes on without the step
REQUEUED: Literal["requeued"] = "requeued"  # queued again onto a moved target (IntegrationRequeued): its copy is the step that counts
_SETTLED = ("verified", *DROPPED, REQUEUED)


@dataclass(frozen=True)
class StepState:
    step: int
    task_id: str
    binding_id: str
    commit: str
    worker_id: str
    generation: int
    status: StepStatus = "waiting"
    intent_id: str | None = None  # the pending step intent
    head: str | None = None  # what the integration ref named when it was asked to move (its compare-and-swap)
    merged_onto: str | None = None  # the commit its merge was computed on (the verified head, or the open batch's tip)
    merge_commit: str | None = None
    tree: str | None = None
    merge: str | None = None  # merged | already-merged
    verification_binding: str | None = None
    code: str | None = None  # why it stopped the queue
    message: str | None = None
    paths: tuple[str, ...] = ()
    base: str | None = None  # dropped from a queue that goes on: the integration head it did not go onto
    batch: tuple[int, int] | None = None  # verified by the check on step batch[1]'s merge, covering batch[0]..[1]


@dataclass(frozen=True)
class Verification:
    """[integration] speculate: a check run on the merge of steps first..last, started while the steps it assumed
    (ahead of it, not verified then) were still being checked (IntegrationVerificationStarted)."""

    first: int
    last: int
    binding_id: str
    head: str  # what its first step's merge was computed on
    assumed: tuple[int, ...]
    status: Literal["running", "decided", "cancelled"] = "running"


@dataclass(frozen=True)
class Approval:
    by: str
    bindings: tuple[str, ...]  # the binding ids approved, sorted


@dataclass(frozen=True)
class RequiredCheckState:
    check: str
    config_sha256: str


@dataclass(frozen=True)
class Integration:
    run_id: str
    version: int
    approvals: tuple[Approval, ...] = ()
    prepared: bool = False
    repository: str | None = None
    target_branch: str | None = None
    target_ref: str | None = None
    expected_commit: str | None = None
    integration_ref: str | None = None
    required_checks: tuple[RequiredCheckState, ...] = ()
    steps: tuple[StepState, ...] = ()
    target_intent: str | None = None
    target: Literal["requested", "completed", "moved"] | None = None
    target_code: str | None = None
    final_commit: str | None = None
    final_tree: str | None = None
    receipt_sha256: str | None = None
    sealed_at: int | None = None  # the position of ReceiptSealed
    rolling: bool = False  # a queue that goes on (IntegrationPrepared v2)
    closed: bool = False  # IntegrationQueueClosed: no step comes any more
    target_at: str | None = None  # rolling: the commit the last move left the target at
    target_found: str | None = None  # IntegrationTargetMoved: what the target named instead of the expected commit
    moved_by_others: tuple[tuple[str, str], ...] = ()  # IntegrationTargetMovedByOthers: (expected, found) each
    requeues: int = 0  # IntegrationRequeued: how many times the queue went on from a moved target
    onto: str | None = None  # the commit the last IntegrationRequeued went on from
    rebased_after: int = 0  # the steps numbered up to this one were verified before the last IntegrationRequeued
    delivered_through: int = 0  # rolling: the last step whose merge a target move delivered
    failing: int | None = None  # [integration] batch: the first step of the open batch whose merge is known to fail
    failed_check: tuple[str, str, str, str] | None = None  # the check run that failed on step failing's merge:
    # (verification binding, check, check id, code)
    verifications: tuple[Verification, ...] = ()  # [integration] speculate: each started, in order

    @property
    def status(self) -> IntegrationStatus:
        if not self.prepared:
            return "unprepared"
        if self.rolling:
            return self._rolling_status()
        if self.target == "completed":
            return "completed"
        if self.target == "moved" or any(s.status in _STOPPING for s in self.steps):
            return "stopped"
        if self.target == "requested":
            return "updating-target"
        if any(s.status == "merged" for s in self.steps):
            return "verifying"
        if all(s.status == "verified" for s in self.steps):
            return "updating-target"
        return "merging"

    def _rolling_status(self) -> IntegrationStatus:
        if self.target == "moved" or any(s.status == "failed" for s in self.steps):
            return "stopped"
        if self.target == "requested":
            return "updating-target"
        if any(s.status == "merged" for s in self.steps):
            return "verifying"
        if any(s.status not in _SETTLED for s in self.steps):
            return "merging"
        if self.head() != self.target_expected:
            return "updating-target"
        if not self.closed:
            return "open"
        return "completed" if self.final_commit is not None else "stopped"

    @property
    def ended(self) -> bool:
        return self.status in ("completed", "stopped")

    def moved_unrecorded(self) -> bool:
        """The target move found the target moved by someone else, and who moved it is not recorded yet (the queue
        may yet go on from there: domain/merge_queue/requeue.py)."""
        expected, found = self.target_expected, self.target_found
        return (self.target == "moved" and self.target_code == Code.TARGET_MOVED and expected is not None
                and found is not None and (expected, found) not in self.moved_by_others)

    @property
    def target_expected(self) -> str | None:
        """The commit the target is expected to name now: where the last move left it, or where it was."""
        return self.target_at or self.expected_commit

    def next_step(self) -> StepState | None:
        """The first step without its final outcome (waiting, merging or merged), if the queue goes on."""
        if self.status not in ("merging", "verifying"):
            return None
        for step in self.steps:
            if step.status not in (_SETTLED if self.rolling else ("verified",)):
                return step
        return None

    def open_batch(self) -> tuple[StepState, ...]:
        """The steps merged and not verified yet, in order: checked together by the next check run."""
        return tuple(s for s in self.steps if s.status == "merged")

    def tip(self) -> str:
        """What the next step merges onto: the open batch's last merge, or the integration head."""
        batch = self.open_batch()
        if batch:
            assert batch[-1].merge_commit is not None
            return batch[-1].merge_commit
        return self.head()

    def probe(self, batch_size: int | None = None) -> tuple[StepState, ...]:
        """The steps the next verdict covers (its check runs on the merge of the last of them): while the open
        batch is bisected (a failing merge is known) the first half of what lies before that failing step, which
        is the failing step alone when it is the first (its recorded result rejects it); else what the verification
        running on the open batch's first step covers ([integration] speculate), or the open batch's first
        batch_size steps (None: all of it)."""
        batch = self.open_batch()
        numbers = [s.step for s in batch]
        if self.failing is not None and self.failing in numbers:
            hi = numbers.index(self.failing)
            return batch[:(hi - 1) // 2 + 1] if hi > 0 else batch[:1]
        running = self.running_at(numbers[0]) if numbers else None
        if running is not None:
            return tuple(s for s in batch if running.first <= s.step <= running.last)
        return batch if batch_size is None else batch[:batch_size]

    def known_to_fail(self, probe: Sequence[StepState]) -> tuple[str, str, str, str] | None:
        """The check run that already failed on the probe's merge, when the probe is the failing step alone (its
        merge ended the batch check that failed): its verdict needs no check run again."""
        if self.failing is None or [s.step for s in probe] != [self.failing]:
            return None
        return self.failed_check

    def running(self) -> tuple[Verification, ...]:
        """[integration] speculate: the verifications started and neither decided nor cancelled, in order."""
        return tuple(v for v in self.verifications if v.status == "running")

    def running_at(self, first: int) -> Verification | None:
        return next((v for v in self.verifications if v.status == "running" and v.first == first), None)

    def delivered(self, step: StepState) -> bool:
        """Whether the step's work reached the target: verified, and the target moved to its head or beyond."""
        if step.status != "verified" or self.final_commit is None:
            return False
        if not self.rolling:
            return self.target == "completed"
        return step.step <= self.delivered_through

    def last_of(self, task_id: str) -> StepState | None:
        """The task's last step, if it has one."""
        steps = [s for s in self.steps if s.task_id == task_id]
        return steps[-1] if steps else None

    def step(self, number: int) -> StepState:
        return self.steps[number - 1]

    def ref_from(self) -> str:
        """Rolling: what the integration ref names now (the last step that moved it, a rejected one too), or the
        expected commit while no step moved it."""
        assert self.expected_commit is not None
        moved = [s.merge_commit for s in self.steps if s.status in ("merged", "verified", "rejected", REQUEUED)
                 and s.merge_commit]
        return moved[-1] if moved else self.expected_commit

    def head(self) -> str:
        """The integration head now: the last verified step's merge commit (since the last IntegrationRequeued), or
        the commit the queue went on from (the expected commit, or the moved target it was re-queued onto)."""
        assert self.expected_commit is not None
        heads = [s.merge_commit for s in self.steps[self.rebased_after:] if s.status == "verified" and s.merge_commit]
        return heads[-1] if heads else (self.onto or self.expected_commit)

    def approved(self) -> frozenset[str]:
        return frozenset(binding for approval in self.approvals for binding in approval.bindings)


def _with_step(integration: Integration, number: int, **changes: object) -> Integration:
    steps = list(integration.steps)
    steps[number - 1] = replace(steps[number - 1], **changes)  # type: ignore[arg-type]
    return replace(integration, steps=tuple(steps))


def apply(integration: Integration | None, event: ev.Event, position: int) -> Integration:
    if integration is None:
        run_id = getattr(event, "run_id")
        integration = Integration(run_id=run_id, version=0)
    integration = replace(integration, version=event.version)
    if isinstance(event, ev.ApprovalRecorded):
        return replace(integration, approvals=integration.approvals + (
            Approval(event.by, tuple(sorted({c.binding_id for c in event.candidates}))),))
    if isinstance(event, ev.IntegrationPrepared | ev.IntegrationPreparedV2):
        return replace(integration, prepared=True, rolling=isinstance(event, ev.IntegrationPreparedV2), repository=event.repository, target_branch=event.target_branch,
                       target_ref=event.target_ref, expected_commit=event.expected_commit,
                       integration_ref=event.integration_ref,
                       required_checks=tuple(RequiredCheckState(c.check, c.config_sha256) for c in event.required_checks),
                       steps=tuple(StepState(step=n, task_id=s.task_id, binding_id=s.binding_id, commit=s.commit,
                                             worker_id=s.worker_id, generation=s.generation)
                                   for n, s in enumerate(event.steps, start=1)))
    if isinstance(event, ev.IntegrationStepQueued):
        return replace(integration, steps=integration.steps + (StepState(
            step=event.step, task_id=event.task_id, binding_id=event.binding_id, commit=event.commit,
            worker_id=event.worker_id, generation=event.generation),))
    if isinstance(event, ev.IntegrationQueueClosed):
        return replace(integration, closed=True)
    if isinstance(event, ev.IntegrationStepRequested):
        return _with_step(integration, event.step, status="merging", intent_id=event.intent_id, head=event.head,
                          merged_onto=event.merged_onto or event.head, merge_commit=event.merge_commit,
                          tree=event.tree, merge=event.merge)
    if isinstance(event, ev.IntegrationStepMerged):
        return _with_step(integration, event.step, status="merged", intent_id=None, merge_commit=event.merge_commit,
                          tree=event.tree)
    if isinstance(event, ev.IntegrationStepFailed):
        return _with_step(integration, event.step, status="failed", intent_id=None, code=event.code,
                          message=event.message)
    if isinstance(event, ev.IntegrationStepConflicted):
        return _with_step(integration, event.step, status="conflicted", head=event.head, code=event.reason,
                          message=event.message, paths=tuple(event.paths), base=event.head)
    if isinstance(event, ev.IntegrationStepVerified):
        return _decided(_with_step(integration, event.step, status="verified",
                                   verification_binding=event.verification_binding), event.verification_binding)
    if isinstance(event, ev.IntegrationStepRejected):
        integration = _decided(integration, event.verification_binding)
        return replace(_with_step(integration, event.step, status="rejected",
                                  verification_binding=event.verification_binding, code=event.code,
                                  message=event.message, base=integration.head()),
                       failing=None, failed_check=None)  # the step that breaks its batch is found: bisected
    if isinstance(event, ev.IntegrationBatchVerified):
        steps = tuple(replace(s, status="verified", verification_binding=event.verification_binding,
                              batch=(event.first_step, event.last_step))
                      if s.status == "merged" and event.first_step <= s.step <= event.last_step else s
                      for s in integration.steps)
        return _decided(replace(integration, steps=steps), event.verification_binding)
    if isinstance(event, ev.IntegrationBatchFailed):
        integration = _decided(integration, event.verification_binding)
        if integration.failing is not None and integration.failing <= event.last_step:
            return integration
        return replace(integration, failing=event.last_step,
                       failed_check=(event.verification_binding, event.check, event.check_id, event.code))
    if isinstance(event, ev.IntegrationBatchRequeued):
        return _batch_requeued(integration, event)
    if isinstance(event, ev.IntegrationVerificationStarted):
        return replace(integration, verifications=integration.verifications + (Verification(
            event.first_step, event.last_step, event.verification_binding, event.head, tuple(event.assumed)),))
    if isinstance(event, ev.IntegrationVerificationCancelled):
        return replace(integration, verifications=tuple(
            replace(v, status="cancelled") if v.status == "running" and v.binding_id == event.verification_binding
            else v for v in integration.verifications))
    if isinstance(event, ev.IntegrationTargetRequested | ev.IntegrationTargetRequestedV2):
        return replace(integration, target="requested", target_intent=event.intent_id)
    if isinstance(event, ev.IntegrationCompleted) and integration.rolling:  # one move of several
        reached = [s.step for s in integration.steps if s.status == "verified" and s.merge_commit == event.commit]
        return replace(integration, target=None, target_intent=None, target_at=event.commit, final_commit=event.commit,
                       final_tree=event.tree,
                       delivered_through=max(reached[-1] if reached else 0, integration.delivered_through))
    if isinstance(event, ev.IntegrationCompleted):
        return replace(integration, target="completed", target_intent=None, final_commit=event.commit,
                       final_tree=event.tree)
    if isinstance(event, ev.IntegrationTargetMoved):
        # checked out in a worktree: nothing is wrong with the queue; once switched away, the target is asked again
        again = event.code == Code.TARGET_CHECKED_OUT
        return replace(integration, target=None if again else "moved", target_intent=None, target_code=event.code,
                       target_found=event.found)
    if isinstance(event, ev.IntegrationTargetMovedByOthers):
        return replace(integration, moved_by_others=integration.moved_by_others + (
            (event.expected_commit, event.found),))
    if isinstance(event, ev.IntegrationRequeued):
        return _requeued(integration, event)
    if isinstance(event, ev.ReceiptSealed):
        return replace(integration, receipt_sha256=event.receipt_sha256, sealed_at=position)
    if isinstance(event, ev.IntentCancelled):
        return _cancelled(integration, event.intent_id)
    return integration


def _decided(integration: Integration, binding_id: str) -> Integration:
    """The running verification of that candidate, if any, decided by the verdict just recorded."""
    return replace(integration, verifications=tuple(
        replace(v, status="decided") if v.status == "running" and v.binding_id == binding_id else v
        for v in integration.verifications))


def _requeued(integration: Integration, event: ev.IntegrationRequeued) -> Integration:
    """The steps that had not reached the target, settled as requeued and queued again from the moved target."""
    return replace(integration, steps=_queued_again(integration.steps, event.requeued, event.first_step),
                   target=None, target_intent=None, target_code=None, target_found=None, target_at=event.onto,
                   requeues=event.round, onto=event.onto, failing=None, failed_check=None,
                   rebased_after=max(event.requeued, default=integration.rebased_after))


def _batch_requeued(integration: Integration, event: ev.IntegrationBatchRequeued) -> Integration:
    """The steps merged after a batch's rejected step, settled as requeued and queued again onto the head."""
    return replace(integration, steps=_queued_again(integration.steps, event.requeued, event.first_step),
                   failing=None, failed_check=None)


def _queued_again(steps: tuple[StepState, ...], requeued: Sequence[int], first_step: int) -> tuple[StepState, ...]:
    """steps with those numbered in requeued settled as requeued, and a copy of each appended, numbered from
    first_step on, waiting to be merged again."""
    again = set(requeued)
    settled = tuple(replace(s, status=REQUEUED, intent_id=None) if s.step in again else s for s in steps)
    copies = tuple(StepState(step=first_step + n, task_id=s.task_id, binding_id=s.binding_id, commit=s.commit,
                             worker_id=s.worker_id, generation=s.generation)
                   for n, s in enumerate(s for s in steps if s.step in again))
    return settled + copies


def _cancelled(integration: Integration, intent_id: str) -> Integration:
    """An intent given up on ('docket reconcile --cancel'): a step goes back to waiting, the target to unrequested."""
    if integration.target_intent == intent_id:
        return replace(integration, target=None, target_intent=None)
    for step in integration.steps:
        if step.intent_id == intent_id:
            return _with_step(integration, step.step, status="waiting", intent_id=None)
    return integration
