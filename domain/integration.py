"""The Integration aggregate: a run's approvals, its merge queue, the move of its target branch and its receipt.

Its stream is ``integration:<run>``. The queue is fixed by IntegrationPrepared.
Each step, in order: its merge is computed in the object store (deterministic:
the same inputs give the same commit), then either IntegrationStepConflicted
stops the queue, or the step intent moves the integration ref by
compare-and-swap (IntegrationStepMerged, or IntegrationStepFailed when the ref
was moved outside docket); a merged step is re-verified (IntegrationStepVerified
or IntegrationStepRejected, which stops the queue). After the last verified
step the target intent moves the target branch from the expected commit
(IntegrationCompleted, or IntegrationTargetMoved: nothing reset or forced).
A target checked out in a clean worktree is moved with that worktree's index
and files, as git's ``updateInstead`` does (``target_move.checkout_to_update``); one with
local changes, or an untracked file where the move writes, is not moved
(``target-checked-out``).
A crash anywhere resumes at the first step without an outcome. ReceiptSealed
ends the stream's story: a run is sealed once.

A queue that goes on (IntegrationPrepared v2, ``docket go``) is opened empty:
steps are appended as their tasks pass (IntegrationStepQueued); a step that
conflicts or is rejected is dropped (settled, the queue goes on from the same
head); the target moves whenever verified steps lie beyond the commit it names
(IntegrationCompleted of each move); IntegrationQueueClosed says no step comes
any more, and the queue has ended once every step is settled and the target
names the head. A v1 queue folds as it always did: its first dropped step stops it.

With ``[integration] batch = N`` (N > 1) the steps are merged one on top of the other into an open batch (merged,
not yet verified) of up to N steps, and the required checks run once, on the merged tree of its last step:
IntegrationBatchVerified verifies all of them (IntegrationStepVerified when it holds one step). When it fails
(IntegrationBatchFailed), the batch is bisected: the next check runs on the merge of the middle step of the part
not known good (``probe``); one that passes verifies the steps up to it, one that fails narrows the search,
until the first step whose merge fails is known: it is rejected (IntegrationStepRejected, with that check's
reason), and (a queue that goes on) the steps merged after it are queued again (IntegrationBatchRequeued) onto the
verified head. A failure that needs two steps ends at the later one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from . import events as ev
from .aggregate import next_event
from .kernel.codes import Code
from .kernel.errors import AwaitingApproval, DependenciesUnsettled, Refused
from .foreign_commits import moved_by_others_event
from .run import Run, require_open
from .kernel.streams import integration_stream as stream_of
from .containment.trust import trusted_changes

if TYPE_CHECKING:
    from .effects import Act, ForeignCommits, IntegrationObservation, Unknown

__all__ = [
    "Approval",
    "Integration",
    "RequiredCheckState",
    "StepState",
    "apply",
    "batch_failed",
    "batch_verified",
    "close_queue",
    "conflicted",
    "decide_step",
    "made",
    "open_queue",
    "prepare",
    "queue_step",
    "require_trusted_unchanged",
    "record_approval",
    "rejected",
    "request_step",
    "requeue_after",
    "seal",
    "stream_of",
    "verified",
]

StepStatus = Literal["waiting", "merging", "merged", "verified", "conflicted", "failed", "rejected", "requeued"]
IntegrationStatus = Literal["unprepared", "open", "merging", "verifying", "updating-target", "completed",
                            "stopped"]
_STOPPING = ("conflicted", "failed", "rejected")
DROPPED = ("conflicted", "rejected")  # in a queue that goes on: settled, the queue goes on without the step
REQUEUED = "requeued"  # queued again onto a moved target (IntegrationRequeued): its copy is the step that counts
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
    head: str | None = None  # the integration head it merges into
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
        may yet go on from there: domain/requeue.py)."""
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

    def probe(self) -> tuple[StepState, ...]:
        """The steps the next check covers (it runs on the merge of the last of them): the whole open batch, or
        while it is bisected (a failing merge is known) the first half of what lies before that failing step, which
        is the failing step alone when it is the first (its recorded result rejects it)."""
        batch = self.open_batch()
        if self.failing is None:
            return batch
        numbers = [s.step for s in batch]
        if self.failing not in numbers:
            return batch
        hi = numbers.index(self.failing)
        return batch[:(hi - 1) // 2 + 1] if hi > 0 else batch[:1]

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
                          merge_commit=event.merge_commit, tree=event.tree, merge=event.merge)
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
        return _with_step(integration, event.step, status="verified", verification_binding=event.verification_binding)
    if isinstance(event, ev.IntegrationStepRejected):
        return replace(_with_step(integration, event.step, status="rejected",
                                  verification_binding=event.verification_binding, code=event.code,
                                  message=event.message, base=integration.head()),
                       failing=None)  # the step that breaks its batch is found: the bisection is over
    if isinstance(event, ev.IntegrationBatchVerified):
        steps = tuple(replace(s, status="verified", verification_binding=event.verification_binding,
                              batch=(event.first_step, event.last_step))
                      if s.status == "merged" and event.first_step <= s.step <= event.last_step else s
                      for s in integration.steps)
        return replace(integration, steps=steps)
    if isinstance(event, ev.IntegrationBatchFailed):
        failing = event.last_step if integration.failing is None else min(integration.failing, event.last_step)
        return replace(integration, failing=failing)
    if isinstance(event, ev.IntegrationBatchRequeued):
        return _batch_requeued(integration, event)
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


def _requeued(integration: Integration, event: ev.IntegrationRequeued) -> Integration:
    """The steps that had not reached the target, settled as requeued and queued again from the moved target."""
    return replace(integration, steps=_queued_again(integration.steps, event.requeued, event.first_step),
                   target=None, target_intent=None, target_code=None, target_found=None, target_at=event.onto,
                   requeues=event.round, onto=event.onto, rebased_after=max(event.requeued, default=integration.rebased_after))


def _batch_requeued(integration: Integration, event: ev.IntegrationBatchRequeued) -> Integration:
    """The steps merged after a batch's rejected step, settled as requeued and queued again onto the head."""
    return replace(integration, steps=_queued_again(integration.steps, event.requeued, event.first_step),
                   failing=None)


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


# --- approval and the queue ----------------------------------------------------------------------------------------


def record_approval(existing: Integration | None, run: Run, *, by: str,
                    candidates: Sequence[tuple[str, str, str]], now: str) -> list[ev.Event]:
    """ApprovalRecorded of candidates, each (task, binding id, commit). Refused once a fixed queue is prepared, or a
    queue that goes on is closed or ended: a candidate waiting there (one that changes the run's trusted paths) is
    approved while the queue goes on."""
    require_open(run)
    if existing is not None and existing.prepared and (not existing.rolling or existing.closed or existing.ended):
        raise Refused(Code.INTEGRATION_PREPARED, f"the integration of run {run.run_id} is prepared already; an approval "
                                              "now would change nothing")
    if not candidates:
        raise Refused(Code.NOTHING_TO_APPROVE, f"run {run.run_id} has no confirmed handoff to approve (an offered one "
                                            "is confirmed by 'docket handoff confirm CANDIDATE', or by "
                                            "'docket integrate', which then waits for approval)")
    return [next_event(ev.ApprovalRecorded, stream_of(run.run_id), 0 if existing is None else existing.version, now,
                       run_id=run.run_id, by=by,
                       candidates=[ev.ApprovedCandidate(task_id=t, binding_id=b, commit=c) for t, b, c in candidates])]


def prepare(existing: Integration | None, run: Run, *, repository: str, target_branch: str, expected_commit: str,
            integration_ref: str, steps: Sequence[ev.IntegrationStep], required_checks: Sequence[ev.RequiredCheck],
            overlaps: Sequence[ev.PathOverlapWarning], approval_required: bool, now: str,
            foreign: ForeignCommits | None = None,
            changed: Mapping[str, Sequence[str]] | None = None) -> list[ev.Event]:
    """IntegrationPrepared (and IntegrationTargetMovedByOthers, as open_queue records it, when expected_commit is
    not the run's base); nothing when it is prepared already. Refused ``nothing-to-integrate`` without a step,
    ``awaiting-approval`` when approval is required and a step's candidate is not approved, ``config-change`` when a
    step's candidate (changed: its changed paths by binding id) changes a trusted path unapproved."""
    if existing is not None and existing.prepared:
        return []
    changed = changed or {}
    require_open(run)
    if not steps:
        raise Refused(Code.NOTHING_TO_INTEGRATE, f"run {run.run_id} has no confirmed handoff to integrate")
    for step in steps:
        require_trusted_unchanged(existing, run, step, changed.get(step.binding_id, ()))
    approved_by: list[str] = []
    if approval_required:
        approvals = existing.approvals if existing is not None else ()
        approved = {binding for approval in approvals for binding in approval.bindings}
        waiting = [s.task_id for s in steps if s.binding_id not in approved]
        if waiting:
            raise AwaitingApproval(f"integration of run {run.run_id} needs approval of task(s) "
                                   f"{', '.join(waiting)} ('docket approve {run.run_id} --by NAME')")
        wanted = {s.binding_id for s in steps}
        approved_by = sorted({a.by for a in approvals if wanted & set(a.bindings)})
    version = 0 if existing is None else existing.version
    target_ref = f"refs/heads/{target_branch}"
    return [next_event(ev.IntegrationPrepared, stream_of(run.run_id), version,
                       now, run_id=run.run_id, repository=repository, target_branch=target_branch,
                       target_ref=target_ref, expected_commit=expected_commit,
                       integration_ref=integration_ref, steps=list(steps), required_checks=list(required_checks),
                       overlaps=list(overlaps), approved_by=approved_by),
            *_moved_at_start(run, version + 1, now, target_ref=target_ref, found=expected_commit, foreign=foreign)]


def open_queue(existing: Integration | None, run: Run, *, repository: str, target_branch: str, expected_commit: str,
               integration_ref: str, required_checks: Sequence[ev.RequiredCheck], now: str,
               foreign: ForeignCommits | None = None, moved_by_docket: bool = False) -> list[ev.Event]:
    """IntegrationPrepared v2, a queue that goes on from expected_commit (what the target names now), with no step
    yet; nothing when the run's queue is prepared. When expected_commit is not the run's base (someone moved the
    target while the agents worked), IntegrationTargetMovedByOthers with it, naming foreign (the commits docket
    did not see come from the run): the queue goes on on top of them, and the ledger and the receipt say so; not
    when moved_by_docket (other docket runs of this ledger moved it, as their own events say: domain/requeue.py)."""
    if existing is not None and existing.prepared:
        return []
    require_open(run)
    version = 0 if existing is None else existing.version
    target_ref = f"refs/heads/{target_branch}"
    return [next_event(
        ev.IntegrationPreparedV2, stream_of(run.run_id), version, now, run_id=run.run_id, repository=repository,
        target_branch=target_branch, target_ref=target_ref, expected_commit=expected_commit,
        integration_ref=integration_ref, steps=[], required_checks=list(required_checks), overlaps=[], approved_by=[]),
        *([] if moved_by_docket else _moved_at_start(run, version + 1, now, target_ref=target_ref,
                                                      found=expected_commit, foreign=foreign))]


def _moved_at_start(run: Run, version: int, now: str, *, target_ref: str, found: str,
                    foreign: ForeignCommits | None) -> list[ev.Event]:
    """IntegrationTargetMovedByOthers (seen queue-opened) when the queue starts from a commit not the run's base."""
    if run.base_commit is None or found == run.base_commit:
        return []
    return [moved_by_others_event(run.run_id, version, now, target_ref=target_ref, expected=run.base_commit,
                                  found=found, seen="queue-opened", foreign=foreign)]


def queue_step(integration: Integration, run: Run, step: ev.IntegrationStep, *, waiting_for: Sequence[str],
               overlaps: Sequence[ev.PathOverlapWarning], now: str, changed: Sequence[str] = ()) -> list[ev.Event]:
    """IntegrationStepQueued of a task's confirmed candidate; nothing when that candidate is queued already.
    Refused ``queue-closed`` once closed, ``queue-stopped`` once it stopped, ``config-change`` while its candidate
    (changed: its changed paths) changes a path the run trusts unapproved, ``dependencies-unsettled`` while a task it depends on (waiting_for: those
    whose step is not verified) is not integrated yet."""
    require_open(run)
    if not integration.rolling:
        raise Refused(Code.QUEUE_FIXED, f"the integration of run {run.run_id} was fixed when it was prepared")
    if any(s.binding_id == step.binding_id for s in integration.steps):
        if integration.ended and not integration.moved_unrecorded():  # it will never be taken: say so, once asked
            raise Refused(Code.QUEUE_STOPPED, f"the merge queue of run {run.run_id} stopped ({integration.status}) "
                                           f"before task {step.task_id}'s step was integrated")
        return []
    if integration.closed:
        raise Refused(Code.QUEUE_CLOSED, f"the merge queue of run {run.run_id} is closed")
    if integration.moved_unrecorded():
        raise DependenciesUnsettled(f"the target of run {run.run_id} was found moved; task {step.task_id} is queued "
                                    "once the queue goes on from where it is")
    if integration.ended:
        raise Refused(Code.QUEUE_STOPPED, f"the merge queue of run {run.run_id} stopped ({integration.status}); "
                                       "nothing more is integrated")
    if waiting_for:
        raise DependenciesUnsettled(f"task {step.task_id} depends on {', '.join(waiting_for)}, not "
                                    "integrated yet")
    require_trusted_unchanged(integration, run, step, changed)
    return [next_event(ev.IntegrationStepQueued, stream_of(run.run_id), integration.version, now, run_id=run.run_id,
                       step=len(integration.steps) + 1, task_id=step.task_id, binding_id=step.binding_id,
                       commit=step.commit, worker_id=step.worker_id, generation=step.generation,
                       overlaps=list(overlaps[:1000]))]


def require_trusted_unchanged(integration: Integration | None, run: Run, step: ev.IntegrationStep,
                              changed: Sequence[str]) -> None:
    """Refused ``config-change`` when the step's candidate changes a path the run trusts (domain/containment/trust.py) and no
    ApprovalRecorded names it: its checks passing is not enough, a person decides."""
    held = trusted_changes(changed, run.trusted_paths)
    if held and (integration is None or step.binding_id not in integration.approved()):
        raise Refused(Code.CONFIG_CHANGE, f"task {step.task_id}'s candidate changes {', '.join(held[:5])}"
                                       f"{' and more' if len(held) > 5 else ''}, which the run trusts; it is "
                                       f"integrated only once a person approves it ('docket approve {run.run_id} "
                                       f"--task {step.task_id} --by NAME')")


def close_queue(integration: Integration, run: Run, *, unfinished: Sequence[str], now: str) -> list[ev.Event]:
    """IntegrationQueueClosed once every task of the run has finished (unfinished: those that have not)."""
    if not integration.rolling or integration.closed:
        return []
    require_open(run)
    if unfinished:
        raise Refused(Code.TASKS_UNFINISHED, f"task(s) {', '.join(unfinished)} of run {run.run_id} have not finished")
    return [next_event(ev.IntegrationQueueClosed, stream_of(run.run_id), integration.version, now, run_id=run.run_id,
                       steps=len(integration.steps))]


def _pending(integration: Integration, number: int) -> StepState | None:
    """The step, when it is the next to do; None when it is done already or the queue has ended (another
    integrator got there first: nothing to decide). Refused ``step-not-next`` while an earlier step is to do."""
    step = integration.next_step()
    if step is not None and step.step == number:
        return step
    if (step is not None and step.step < number) or not integration.prepared or not 1 <= number <= len(
            integration.steps):
        raise Refused(Code.STEP_NOT_NEXT, f"step {number} of the integration of run {integration.run_id} is not the "
                                       f"next to do ({integration.status})")
    return None


def _to_merge(integration: Integration, number: int, batch_size: int) -> StepState | None:
    """The step, when it is the next to merge: the next to do, or the first to merge after an open batch (merged
    steps not verified yet) of fewer than batch_size steps ([integration] batch) that is not being bisected."""
    batch = integration.open_batch()
    if (batch and len(batch) < batch_size and integration.failing is None
            and integration.status in ("merging", "verifying")):
        following = next((s for s in integration.steps if s.status in ("waiting", "merging")), None)
        if following is not None and following.step == number:
            return following
    return _pending(integration, number)


def request_step(integration: Integration, number: int, *, intent_id: str, head: str, merge_commit: str, tree: str,
                 merge: Literal["merged", "already-merged"], now: str, merged_onto: str | None = None,
                 merge_message: str | None = None, batch_size: int = 1,
                 remote: tuple[str, str] | None = None) -> list[ev.Event]:
    """The intent to move the integration ref from head to the step's computed merge (and, the run having a shared
    git remote (name, URL), the same ref there); nothing while one is pending or the step is merged. batch_size:
    [integration] batch (a step may merge onto an open batch smaller than it)."""
    step = _to_merge(integration, number, batch_size)
    if step is None or step.status != "waiting":
        return []
    assert integration.repository is not None and integration.integration_ref is not None
    wanted = integration.ref_from() if integration.rolling else integration.tip()
    if head != wanted:
        raise Refused(Code.STALE_HEAD, f"step {number} must move the integration ref from {wanted}, not {head}")
    on_remote = {} if remote is None else {"remote": remote[0], "remote_url": remote[1]}
    return [next_event(ev.IntegrationStepRequestedV2 if remote else ev.IntegrationStepRequested,
                       stream_of(integration.run_id), integration.version, now,
                       intent_id=intent_id, run_id=integration.run_id, step=number, task_id=step.task_id,
                       binding_id=step.binding_id, candidate_commit=step.commit, repository=integration.repository,
                       integration_ref=integration.integration_ref, head=head, merge_commit=merge_commit, tree=tree,
                       merge=merge, merged_onto=merged_onto, merge_message=merge_message, **on_remote)]


def conflicted(integration: Integration, number: int, *, head: str, reason: Literal["conflicted", "unmergeable"],
               paths: Sequence[str], message: str, now: str) -> list[ev.Event]:
    step = _pending(integration, number)
    if step is None or step.status != "waiting":
        return []
    return [next_event(ev.IntegrationStepConflicted, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, step=number, task_id=step.task_id, binding_id=step.binding_id,
                       head=head, reason=reason, paths=list(paths[:1000]), message=message[:4000])]


def decide_step(integration: Integration, intent: ev.IntegrationStepRequested, observed: IntegrationObservation,
                now: str) -> ev.Event | Unknown | Act:
    """Merged when the integration ref names the merge commit; Act while it names the head (or, for the first
    step, is absent); failed when it names anything else; unknown when it cannot be read."""
    from .effects import Act, Unknown

    stream = stream_of(integration.run_id)
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, step=intent.step)
    if observed.commit == intent.merge_commit and observed.state != "unreadable":
        return next_event(ev.IntegrationStepMerged, stream, integration.version, now, **common,
                          task_id=intent.task_id, binding_id=intent.binding_id, merge_commit=intent.merge_commit,
                          tree=intent.tree, merge=intent.merge, result="observed")
    first = intent.step == 1 or (integration.rolling and intent.head == integration.expected_commit)
    if observed.state == "at-parent" or (observed.state == "missing" and first):
        return Act()
    if observed.state == "unreadable":
        return Unknown(observed.detail or f"cannot read {intent.integration_ref}")
    found = observed.commit if observed.commit and len(observed.commit) in (40, 64) else None
    what = "is absent" if observed.state == "missing" else f"names {found or 'something else'}"
    return next_event(ev.IntegrationStepFailed, stream, integration.version, now, **common,
                      code="integration-ref-moved", found=found,
                      message=(f"{intent.integration_ref} {what}, not step {intent.step}'s head {intent.head} or its "
                               f"merge {intent.merge_commit}; it was moved outside docket and is left untouched"
                               + (f" ({observed.detail})" if observed.detail else ""))[:4000])


def verified(integration: Integration, number: int, *, verification_binding: str, tree: str,
             checks: Sequence[ev.CheckBinding], now: str) -> list[ev.Event]:
    step = _pending(integration, number)
    if step is None:
        return []
    if step.status != "merged":
        raise Refused(Code.STEP_NOT_MERGED, f"step {number} is {step.status}, not merged")
    return [next_event(ev.IntegrationStepVerified, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, step=number, task_id=step.task_id,
                       verification_binding=verification_binding, tree=tree, checks=list(checks))]


def rejected(integration: Integration, number: int, *, verification_binding: str, check: str, check_id: str,
             code: str, message: str, now: str) -> list[ev.Event]:
    step = _pending(integration, number)
    if step is None:
        return []
    if step.status != "merged":
        raise Refused(Code.STEP_NOT_MERGED, f"step {number} is {step.status}, not merged")
    return [next_event(ev.IntegrationStepRejected, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, step=number, task_id=step.task_id,
                       verification_binding=verification_binding, check=check, check_id=check_id, code=code,
                       message=message[:4000])]


def _probed(integration: Integration, first: int, last: int) -> bool:
    """Whether first..last is what the next check covers (else another integrator recorded it already)."""
    probe = integration.probe()
    return bool(probe) and probe[0].step == first and probe[-1].step == last


def batch_verified(integration: Integration, first: int, last: int, *, verification_binding: str, tree: str,
                   checks: Sequence[ev.CheckBinding], now: str) -> list[ev.Event]:
    """IntegrationBatchVerified of steps first..last (the next check's range), whose last merge's tree the checks
    passed on; nothing when they are settled already."""
    if not _probed(integration, first, last) or first == last:
        return []
    covered = [s for s in integration.open_batch() if first <= s.step <= last]
    return [next_event(ev.IntegrationBatchVerified, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, first_step=first, last_step=last,
                       tasks=[s.task_id for s in covered], verification_binding=verification_binding, tree=tree,
                       checks=list(checks))]


def batch_failed(integration: Integration, first: int, last: int, *, verification_binding: str, tree: str,
                 check: str, check_id: str, code: str, message: str, now: str) -> list[ev.Event]:
    """IntegrationBatchFailed of steps first..last (the next check's range, more than one step); nothing when
    recorded already."""
    if not _probed(integration, first, last) or first == last:
        return []
    return [next_event(ev.IntegrationBatchFailed, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, first_step=first, last_step=last,
                       verification_binding=verification_binding, tree=tree, check=check, check_id=check_id,
                       code=code, message=message[:4000])]


def requeue_after(integration: Integration, rejected_step: int, now: str) -> list[ev.Event]:
    """After a batch's step was rejected (integration: with the rejection applied), in a queue that goes on: the
    steps merged on top of it, queued again onto the verified head (IntegrationBatchRequeued); nothing else."""
    again = [s.step for s in integration.open_batch() if s.step > rejected_step]
    if not integration.rolling or not again:
        return []
    return [next_event(ev.IntegrationBatchRequeued, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, rejected_step=rejected_step, requeued=again,
                       first_step=len(integration.steps) + 1, onto=integration.head())]


def made(outcome: ev.Event) -> ev.Event:
    """After an act: the outcome made now, rather than found."""
    if isinstance(outcome, (ev.IntegrationStepMerged, ev.IntegrationCompleted)):
        return outcome.model_copy(update={"result": "created"})
    return outcome


# --- the receipt ---------------------------------------------------------------------------------------------------


def seal(integration: Integration, *, receipt: dict, receipt_sha256: str, ledger_position: int,  # type: ignore[type-arg]
         ledger_digest: str, merkle_root: str, cited_positions: Sequence[int], now: str) -> list[ev.Event]:
    """ReceiptSealed, once; nothing when the run is sealed already. Refused ``not-integrated`` until the queue has
    ended (completed, or stopped with its reason recorded)."""
    if integration.receipt_sha256 is not None:
        return []
    if not integration.ended:
        raise Refused(Code.NOT_INTEGRATED, f"the integration of run {integration.run_id} is {integration.status}; a "
                                        "run is sealed once its integration has ended ('docket integrate')")
    return [next_event(ev.ReceiptSealed, stream_of(integration.run_id), integration.version, now,
                       run_id=integration.run_id, receipt_sha256=receipt_sha256, ledger_position=ledger_position,
                       ledger_digest=ledger_digest, merkle_root=merkle_root, receipt=receipt,
                       cited_positions=list(cited_positions))]
