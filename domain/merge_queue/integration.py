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
from typing import TYPE_CHECKING, Literal

from .. import events as ev
from ..aggregate import next_event
from ..kernel.codes import Code
from ..kernel.errors import AwaitingApproval, DependenciesUnsettled, Refused
from .foreign_commits import moved_by_others_event
from ..run import Run, require_open
from ..kernel.streams import integration_stream as stream_of
from ..containment.trust import trusted_changes
from .integration_state import Approval, Integration, RequiredCheckState, StepState, apply
from ..effects import Act, Unknown

if TYPE_CHECKING:
    from ..effects import Act, ForeignCommits, IntegrationObservation, Unknown

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
    when moved_by_docket (other docket runs of this ledger moved it, as their own events say: domain/merge_queue/requeue.py)."""
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
               overlaps: Sequence[ev.PathOverlapWarning], now: str, changed: Sequence[str] = (),
               predicted_conflicts: Sequence[str] = ()) -> list[ev.Event]:
    """IntegrationStepQueued of a task's confirmed candidate; nothing when that candidate is queued already.
    Refused ``queue-closed`` once closed, ``queue-stopped`` once it stopped, ``config-change`` while its candidate
    (changed: its changed paths) changes a path the run trusts unapproved, ``dependencies-unsettled`` while a task it depends on (waiting_for: those
    whose step is not verified) is not integrated yet. predicted_conflicts: the paths its candidate was foreseen to
    conflict on, merged onto the queue's tip as it stood (adapters/service_layer/merge_queue/foreseen.py)."""
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
                       overlaps=list(overlaps[:1000]), predicted_conflicts=list(predicted_conflicts[:1000]))]


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
