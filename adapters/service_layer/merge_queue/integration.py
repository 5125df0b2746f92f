"""Use case: integrate a run's confirmed candidates into its target branch, as a journaled merge queue.

``integrate`` can be run again at any time and goes on where the ledger says:

1. before the queue is fixed: offered handoffs are confirmed (or rejected) as
   the integrator would, each task's latest confirmed candidate becomes a step
   (in the run's task order; tasks without one are skipped), approval is
   checked, and IntegrationPrepared fixes the target, its expected commit, the
   steps and the required checks;
2. each step without an outcome: the merge is computed in the object store
   first (deterministic, so a crash and a rerun make the same commit), then
   either IntegrationStepConflicted stops the queue, or the step's intent moves
   ``refs/docket/integrations/<run>`` by compare-and-swap;
3. a merged step is re-verified: its tree is pinned as a candidate of the
   step's task (boundary ``integration-<step>``) and every required check runs
   on it (a result recorded there under the same configuration is reused, never
   run twice): IntegrationStepVerified, or IntegrationStepRejected which stops
   the queue; with ``[integration] batch = N`` the checks run once on the merge of
   the last of up to N steps merged one on top of the other, and a batch that
   fails is bisected (domain/merge_queue/integration.py: ``probe``);
4. after the last step, the target's intent moves the target branch from the
   expected commit (IntegrationCompleted), or finds it moved or checked out
   (IntegrationTargetMoved): nothing is reset or forced. A worktree that has the
   target checked out, clean, is moved with it (its index and files first, as
   git's ``updateInstead``; the intent names it); one with local changes, or any
   with ``checked_out_target = "refuse"``, is refused ``target-checked-out``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain import candidate as candidate_aggregate
from ....domain.merge_queue import integration as integration_aggregate
from ....domain.merge_queue.integration_state import DROPPED
from ....domain.merge_queue import target_move
from ....domain import events as ev
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DependenciesUnsettled, OutcomeUnknown, Refused, TargetCheckedOut
from .foreseen import foreseen_overlaps, predicted_conflicts, would_queue
from ....domain.run import require_open
from ...world import faults
from ...world.clock import Clock, new_id
from ..use_cases.candidates import drive, load_candidate
from ..use_cases.checks import CheckSpec
from ..use_cases.handoff import confirm_handoff
from .requeue import docket_moves_between, settle_moved_target
from ..kernel.ledger import Ledger
from ..use_cases.runs import load_run
from ....domain.merge_queue import speculation as speculation_rules
from .speculation import Speculation
from .integration_steps import (
    _drive_step, _merge_step, _verify_step, fetch_integrated, integration_ref, load_integration)

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["Integrated", "advance", "integrate", "queue_task", "record_moved_target"]


@dataclass(frozen=True)
class Integrated:
    """Where the integration stands after this pass: the aggregate, the tasks skipped (no confirmed candidate) when
    the queue was fixed by this pass, and the steps' path overlaps the queue was fixed with."""

    integration: integration_aggregate.Integration
    skipped: tuple[str, ...] = ()
    overlaps: tuple[ev.PathOverlapWarning, ...] = ()


def integrate(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, *, tasks: Sequence[str],
              candidates: Mapping[str, Sequence[str]], checks: Sequence[CheckSpec], approval_required: bool,
              artifact_dir: str | None, docket_dir: Path, ledger_path: Path,
              checked_out_target: target_move.CheckedOutTarget = "update", batch: int = 1,
              speculation: Speculation | None = None) -> Integrated:
    """One pass of the queue, to its end (completed or stopped) or its first unknown outcome.

    tasks: the run's tasks in plan order; candidates: each task's candidates (binding ids) in pin order; checks:
    the configured checks, the required ones of which every merged step must pass again; checked_out_target:
    [integration] checked_out_target, what to do with a target some worktree has checked out; batch: [integration]
    batch, the steps one check run covers at most; speculation: the verifications kept in flight (None: one at a
    time)."""
    required = [spec for spec in checks if spec.required]
    skipped: tuple[str, ...] = ()
    existing = load_integration(ledger, run_id)
    if existing is None or not existing.prepared:
        skipped = _prepare(ledger, clock, effector, run_id, tasks, candidates, required, approval_required,
                           checked_out_target)
        faults.crash_point("integrate:after-prepare")
    elif existing.rolling:
        _close_queue(ledger, clock, effector, run_id, tasks, candidates, required)
    integration = advance(ledger, clock, effector, run_id, checks=checks, artifact_dir=artifact_dir,
                          docket_dir=docket_dir, ledger_path=ledger_path, checked_out_target=checked_out_target,
                          batch=batch, speculation=speculation)
    prepared = _prepared_event(ledger, run_id)
    return Integrated(integration, skipped, tuple(prepared.overlaps) if prepared else ())


def advance(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, *, checks: Sequence[CheckSpec],
            artifact_dir: str | None, docket_dir: Path, ledger_path: Path,
            checked_out_target: target_move.CheckedOutTarget = "update",
            move_target: bool = True, batch: int = 1,
            may_grow: Callable[[], bool] = lambda: False,
            going_on: Callable[[], bool] = lambda: True,
            speculation: Speculation | None = None) -> integration_aggregate.Integration:
    """Take the prepared queue as far as it goes now: to its end, its first unknown outcome, or (a queue that goes
    on) until it waits for its next step; move_target False leaves the target where it is. going_on is asked
    before each effect: once it says no (docket go stopping), the queue is left where it is, to go on later.

    batch: the steps one check run covers at most ([integration] batch); an open batch of fewer is checked at once
    unless may_grow says more steps may yet come to join it (docket go, while its agents work).

    speculation ([integration] speculate > 1, a queue that goes on): verifications kept in flight at once
    (``_advance_speculating``). In a queue that goes on, the target moves as soon as a verified step lies beyond it.
    """
    required = [spec for spec in checks if spec.required]
    integration = load_integration(ledger, run_id)
    if (speculation is not None and speculation.speculate > 1 and required and integration is not None
            and integration.rolling):  # without a required check, a step's verdict needs nothing to run
        return _advance_speculating(ledger, clock, effector, run_id, required, speculation,
                                    where=dict(artifact_dir=artifact_dir, docket_dir=docket_dir,
                                               ledger_path=ledger_path),
                                    checked_out_target=checked_out_target, move_target=move_target, batch=batch,
                                    going_on=going_on)
    rounds = 0  # re-queues onto a moved target this pass made (bounded: domain/merge_queue/requeue.py)
    flush = False  # the next step conflicts with the open batch's merges: the batch is checked first
    while True:
        integration = load_integration(ledger, run_id)
        assert integration is not None
        if not going_on():
            return integration
        if target_move.moved_unrecorded(integration):
            rounds += settle_moved_target(ledger, clock, effector, run_id, rounds=rounds)
            continue
        if integration.ended or integration.status == "open":
            return integration
        step = integration.next_step()
        if step is None:
            if not move_target:
                return integration
            _move_target(ledger, clock, effector, integration, checked_out_target)
            continue
        if step.status == "waiting":
            _merge_step(ledger, clock, effector, integration, step)
        elif step.status == "merging":
            _drive_step(ledger, effector, run_id, step)
        else:  # merged: re-verify (with a batch: once the batch is full, or nothing more comes to join it now)
            if batch > 1 and integration.failing is None and not flush and len(integration.open_batch()) < batch:
                following = next((s for s in integration.steps if s.status in ("waiting", "merging")), None)
                if following is not None and following.status == "merging":
                    _drive_step(ledger, effector, run_id, following)
                    continue
                if following is not None:
                    flush = not _merge_step(ledger, clock, effector, integration, following, batch)
                    continue
                if may_grow():
                    if move_target and _behind(integration):
                        _move_target(ledger, clock, effector, integration, checked_out_target)
                        continue
                    return integration
            faults.crash_point("integrate:after-step")
            _verify_step(ledger, clock, effector, integration, integration.probe(), required,
                         artifact_dir=artifact_dir, docket_dir=docket_dir, ledger_path=ledger_path, batched=batch > 1)
            flush = False
            _land(ledger, clock, effector, run_id, checked_out_target, move_target)


def _advance_speculating(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str,
                         required: Sequence[CheckSpec], speculation: Speculation, *, where: dict[str, object],
                         checked_out_target: target_move.CheckedOutTarget, move_target: bool, batch: int,
                         going_on: Callable[[], bool]
                         ) -> integration_aggregate.Integration:
    """``advance`` with up to speculation.speculate verifications in flight (domain/merge_queue/speculation.py):
    steps are merged one on top of the other up to the window, each range's checks start in a thread as soon as
    it is merged, stale ranges are cancelled, and verdicts are recorded in queue order once a range's thread ended,
    each followed by the target's move when a verified step lies beyond it."""
    rounds = 0
    flush = False  # the next step conflicts with the open merges: it waits for their verdicts
    window = speculation_rules.window(batch, speculation.speculate)
    while True:
        integration = load_integration(ledger, run_id)
        assert integration is not None
        if not going_on():
            return integration
        if target_move.moved_unrecorded(integration):
            rounds += settle_moved_target(ledger, clock, effector, run_id, rounds=rounds)
            continue
        if speculation_rules.stale(integration) and speculation.cancel_stale(ledger, clock, run_id):
            continue  # (a decision, and its write transaction, only when the state read says one is stale)
        if integration.ended or integration.status == "open":
            return integration
        if integration.next_step() is None:
            if not move_target:
                return integration
            _move_target(ledger, clock, effector, integration, checked_out_target)
            continue
        following = next((s for s in integration.steps if s.status in ("waiting", "merging")), None)
        if following is not None and following.status == "merging":
            _drive_step(ledger, effector, run_id, following)
            continue
        merged = integration.open_batch()
        if following is not None and not flush and integration.failing is None and len(merged) < window:
            flush = not _merge_step(ledger, clock, effector, integration, following, window)
            continue
        ranges = speculation_rules.to_start(integration, batch=batch, speculate=speculation.speculate)
        started = [speculation.start(ledger, clock, effector, _current(ledger, run_id), scope, required, **where)
                   for scope in ranges]
        if any(started):
            continue  # else the queue moved on meanwhile: what follows reads it again
        speculation.resume(integration, required, **where)
        probe = integration.probe(batch)
        head = integration.running_at(probe[0].step) if probe else None
        if head is None and probe and integration.known_to_fail(probe):  # rejected on the failed batch's check
            _verify_step(ledger, clock, effector, integration, probe, required, batched=batch > 1,
                         **where)  # type: ignore[arg-type]
            continue
        if head is None:  # nothing merged waits for a verdict
            if _land(ledger, clock, effector, run_id, checked_out_target, move_target):
                continue
            return integration
        if speculation.busy(head.binding_id):
            if not _land(ledger, clock, effector, run_id, checked_out_target, move_target):
                speculation.wait(0.25)
            continue
        faults.crash_point("integrate:after-step")
        _verify_step(ledger, clock, effector, integration, probe, required, batched=batch > 1,
                     **where)  # type: ignore[arg-type]
        flush = False
        _land(ledger, clock, effector, run_id, checked_out_target, move_target)


def _current(ledger: Ledger, run_id: str) -> integration_aggregate.Integration:
    integration = load_integration(ledger, run_id)
    assert integration is not None
    return integration


def _land(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str,
          checked_out_target: target_move.CheckedOutTarget, move_target: bool) -> bool:
    """A queue that goes on: move the target to the verified head when a verified step lies beyond it (each
    verified step lands as soon as everything ahead of it has); whether it was asked to move."""
    integration = load_integration(ledger, run_id)
    if not move_target or integration is None or not _behind(integration):
        return False
    _move_target(ledger, clock, effector, integration, checked_out_target)
    return True


def _behind(integration: integration_aggregate.Integration) -> bool:
    """A queue that goes on whose verified steps lie beyond the commit its target names, the target not asked for."""
    return (integration.rolling and integration.target is None
            and any(s.status == "verified" for s in integration.steps[integration.rebased_after:])
            and integration.head() != integration.target_expected)


# --- a queue that goes on ------------------------------------------------------------------------------------------


def queue_task(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, task_id: str, binding: str, *,
               checks: Sequence[CheckSpec], depends_on: Sequence[str]) -> integration_aggregate.Integration:
    """Append the task's confirmed candidate to the run's merge queue (opened first if it is not: a queue that
    goes on, from the commit the target names now), once the steps of the tasks it depends on are verified."""
    existing = load_integration(ledger, run_id)
    candidate = load_candidate(ledger, binding)
    if existing is None or not existing.prepared:
        _open_queue(ledger, clock, effector, run_id, effector.local(candidate.repository), checks)
    integration = load_integration(ledger, run_id)
    assert integration is not None
    assert candidate.worker_id is not None and candidate.commit is not None
    step = ev.IntegrationStep(task_id=task_id, binding_id=binding, commit=candidate.commit,
                              worker_id=candidate.worker_id, generation=candidate.generation or 1)

    def queued(current: integration_aggregate.Integration, now: str, overlaps: list[ev.PathOverlapWarning],
               predicted: Sequence[str] = ()) -> list[ev.Event]:
        verified = {s.task_id for s in current.steps if s.status == "verified"}
        return integration_aggregate.queue_step(current, load_run(ledger, run_id), step,
                                                waiting_for=[d for d in depends_on if d not in verified],
                                                overlaps=overlaps, now=now, changed=candidate.changed_paths,
                                                predicted_conflicts=predicted)

    # conflicts foreseen (the earlier steps whose lines it changes too, a conflict merged onto the tip): looked for
    # in git only once the step would be queued, not on each pass that waits for its dependencies
    overlaps: list[ev.PathOverlapWarning] = []
    predicted: list[str] = []
    if would_queue(lambda: queued(integration, clock.now(), [])):
        repository = effector.local(candidate.repository)
        others = {s.task_id: (s.task_id, s.commit, _changed_paths(ledger, s)) for s in integration.steps
                  if s.status not in DROPPED and s.task_id != task_id}
        overlaps = foreseen_overlaps(effector.ports.merges, repository, task_id, candidate.commit,
                                     candidate.changed_paths, list(others.values()))
        ahead = [s.commit for s in integration.steps if s.status in ("waiting", "merging")]
        predicted = predicted_conflicts(effector.ports.merges, repository, integration.tip(), candidate.commit,
                                        ahead)

    def decision(now: str) -> list[ev.Event]:
        current = load_integration(ledger, run_id)
        assert current is not None
        return queued(current, now, overlaps, predicted)

    ledger.decide(decision, clock.now())
    faults.crash_point("integrate:after-queued")
    current = load_integration(ledger, run_id)
    assert current is not None
    return current


_pinned_paths: dict[tuple[str, str, str], tuple[str, ...]] = {}  # (ledger, binding, commit) -> the paths changed


def _changed_paths(ledger: Ledger, step: integration_aggregate.StepState) -> tuple[str, ...]:
    """The paths a queued step's candidate changed: fixed once it is pinned, so each is read once per process
    (every task queued compared itself with every step by reading each step's candidate: O(N) reads per task)."""
    key = (str(ledger.path), step.binding_id, step.commit)
    paths = _pinned_paths.get(key)
    if paths is None:
        if len(_pinned_paths) > 100_000:
            _pinned_paths.clear()
        paths = _pinned_paths[key] = tuple(load_candidate(ledger, step.binding_id).changed_paths)
    return paths


def _open_queue(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, repository: Path,
                checks: Sequence[CheckSpec]) -> None:
    run = load_run(ledger, run_id)
    target = _observe_target(effector, repository, run.target_branch, None, run.remote)
    if target.state != "found":
        _require_target(run.target_branch, target, "update")  # refused: missing or unreadable
    commit = target.commit
    assert commit is not None
    required = [ev.RequiredCheck(check=s.name, config_sha256=s.config_sha256) for s in checks if s.required]
    # moved by someone else since the run was based (a human pushed, or an agent reset it): the queue goes on from
    # there, and the commits docket never saw are recorded with it
    # (another docket run of this ledger that moved it is no stranger: its own events say so)
    foreign, known = None, None
    if run.base_commit is not None and commit != run.base_commit:
        known = docket_moves_between(ledger, repository, run_id, run.base_commit, commit)
        if known is None:
            foreign = effector.ports.merges.foreign_commits(repository, run.base_commit, commit)
    ledger.decide(lambda now: integration_aggregate.open_queue(
        load_integration(ledger, run_id), load_run(ledger, run_id), repository=str(repository),
        target_branch=run.target_branch, expected_commit=commit, integration_ref=integration_ref(run_id),
        required_checks=required, now=now, foreign=foreign, moved_by_docket=known is not None), clock.now())
    faults.crash_point("integrate:after-prepare")


def _close_queue(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, tasks: Sequence[str],
                 candidates: Mapping[str, Sequence[str]], required: Sequence[CheckSpec]) -> None:
    """Queue what passed without a step yet (in plan order), then close the queue once every task has finished."""
    from ..use_cases.tasks import load_task

    integration = load_integration(ledger, run_id)
    assert integration is not None
    if integration.closed:
        return
    queued = {s.binding_id for s in integration.steps}
    run = load_run(ledger, run_id)
    for task_id in tasks:
        for binding in candidates.get(task_id, ())[-1:]:
            if binding not in queued:
                try:
                    queue_task(ledger, clock, effector, run_id, task_id, binding, checks=required,
                               depends_on=run.plan.depends_on(task_id) if run.plan else ())
                except DependenciesUnsettled:
                    return  # the queue goes on first; closed on a later pass

    def decision(now: str) -> list[ev.Event]:
        current = load_integration(ledger, run_id)
        assert current is not None
        unfinished = [t for t in tasks if load_task(ledger, t).result is None]
        return integration_aggregate.close_queue(current, load_run(ledger, run_id), unfinished=unfinished, now=now)

    try:
        ledger.decide(decision, clock.now())
    except Refused as e:
        if e.code != Code.TASKS_UNFINISHED:
            raise


def _prepared_event(ledger: Ledger, run_id: str) -> ev.IntegrationPrepared | None:
    for _, event in ledger.history(integration_aggregate.stream_of(run_id)):
        if isinstance(event, ev.IntegrationPrepared):
            return event
    return None


# --- preparing the queue -------------------------------------------------------------------------------------------


def _prepare(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, tasks: Sequence[str],
             candidates: Mapping[str, Sequence[str]], required: Sequence[CheckSpec],
             approval_required: bool, checked_out_target: target_move.CheckedOutTarget) -> tuple[str, ...]:
    """Confirm offered handoffs, pick each task's step and record IntegrationPrepared; the tasks skipped."""
    run = load_run(ledger, run_id)
    if run.base_commit is None:
        raise Refused(Code.RUN_BASE_NOT_PINNED, f"run {run_id} has no pinned base commit yet")
    digests = {spec.name: spec.config_sha256 for spec in required}
    picked: list[candidate_aggregate.Candidate] = []
    skipped: list[str] = []
    for task_id in tasks:
        chosen = None
        for binding in reversed(candidates.get(task_id, ())):
            candidate = load_candidate(ledger, binding)
            if candidate.worker_id is None:
                continue  # a pin made outside any worker (an integration's re-verification): never a step
            if candidate.handoff in ("offered", "rejected") and candidate.status == "pinned":
                candidate = confirm_handoff(ledger, clock, effector, binding, digests)  # as the integrator
            if candidate.handoff == "confirmed" and candidate.status == "pinned":
                chosen = candidate
                break
        if chosen is None:
            skipped.append(task_id)
        else:
            picked.append(chosen)
    repository = effector.local(picked[0].repository) if picked else None
    target = _observe_target(effector, repository, run.target_branch, None, run.remote) if repository else None
    if target is not None:
        _require_target(run.target_branch, target, checked_out_target)
    foreign = None
    if (repository is not None and target is not None and target.commit is not None
            and target.commit != run.base_commit):
        foreign = effector.ports.merges.foreign_commits(repository, run.base_commit, target.commit)
    steps = [_step_of(c) for c in picked]
    expected = target.commit if target else run.base_commit
    assert expected is not None  # the target was found (_require_target), else the run's base is pinned
    overlaps: list[ev.PathOverlapWarning] = []  # where two steps' changes meet, line by line (foreseen.py)
    for n, chosen_one in enumerate(picked):
        assert repository is not None and chosen_one.commit is not None
        earlier = [(c.task_id, c.commit, c.changed_paths) for c in picked[:n] if c.commit is not None]
        overlaps += foreseen_overlaps(effector.ports.merges, repository, chosen_one.task_id, chosen_one.commit,
                                      chosen_one.changed_paths, earlier)
    overlaps = overlaps[:1000]

    def decision(now: str) -> list[ev.Event]:
        return integration_aggregate.prepare(
            load_integration(ledger, run_id), load_run(ledger, run_id), repository=str(repository),
            target_branch=run.target_branch, expected_commit=expected,
            integration_ref=integration_ref(run_id), steps=steps,
            required_checks=[ev.RequiredCheck(check=s.name, config_sha256=s.config_sha256) for s in required],
            overlaps=overlaps, approval_required=approval_required, now=now, foreign=foreign,
            changed={c.binding_id: c.changed_paths for c in picked})

    ledger.decide(decision, clock.now())
    return tuple(skipped)


def _observe_target(effector: EffectorPort, repository: Path, branch: str, final_commit: str | None,
                    remote: tuple[str, str] | None = None) -> target_move.TargetObservation:
    """The target branch, and the index and files of the worktree that has it checked out, if any: against the
    commit it names and final_commit (the one it is to move to; None: not known yet). With the run's shared remote
    (name, URL): the branch there, its commit fetched."""
    if remote is not None:
        from ..kernel.intents import remote_target

        return remote_target(effector.ports.remotes, repository, remote, f"refs/heads/{branch}")
    merges = effector.ports.merges
    observed = merges.observe_target(repository, branch)
    if observed.state != "found" or observed.checked_out is None:
        return observed
    assert observed.commit is not None
    return replace(observed, checkout=merges.observe_checkout(Path(observed.checked_out), observed.commit,
                                                              final_commit or observed.commit))


def _step_of(candidate: candidate_aggregate.Candidate) -> ev.IntegrationStep:
    # confirmed and pinned, made by a worker's generation: it has all three
    assert candidate.commit is not None and candidate.worker_id is not None and candidate.generation is not None
    return ev.IntegrationStep(task_id=candidate.task_id, binding_id=candidate.binding_id, commit=candidate.commit,
                              worker_id=candidate.worker_id, generation=candidate.generation)


def _require_target(branch: str, target: target_move.TargetObservation,
                    checked_out_target: target_move.CheckedOutTarget) -> str | None:
    """The worktree to update with the branch, if one has it checked out. Refused unless the target branch names a
    commit and any worktree that has it checked out may be updated, clean (nothing recorded)."""
    if target.state != "found":
        raise Refused("target-unreadable" if target.state == "unreadable" else "target-missing",
                      f"the target branch {branch} cannot be integrated into: "
                      f"{target.detail or ('it ' + ('is absent' if target.state == 'missing' else 'cannot be read'))}")
    return target_move.checkout_to_update(branch, target, policy=checked_out_target)


# --- the target ----------------------------------------------------------------------------------------------------


def _move_target(ledger: Ledger, clock: Clock, effector: EffectorPort, integration: integration_aggregate.Integration,
                 checked_out_target: target_move.CheckedOutTarget) -> None:
    assert integration.repository is not None and integration.target_branch is not None
    if integration.target is None:
        remote = load_run(ledger, integration.run_id).remote
        observed = _observe_target(effector, effector.local(integration.repository), integration.target_branch,
                                   integration.head() if integration.rolling else integration.steps[-1].merge_commit,
                                   remote)
        checkout = None
        if observed.state == "found" and observed.commit == integration.target_expected:
            checkout = _require_target(integration.target_branch, observed, checked_out_target)
        faults.crash_point("integrate:before-target")
        intent_id = new_id("target")

        def decision(now: str) -> list[ev.Event]:
            current = load_integration(ledger, integration.run_id)
            assert current is not None
            require_open(load_run(ledger, integration.run_id))
            return target_move.request_target(current, intent_id=intent_id, checkout=checkout, now=now,
                                              remote=remote)

        ledger.decide(decision, clock.now())
    current = load_integration(ledger, integration.run_id)
    assert current is not None
    if current.target_intent is None:
        return  # another integrator settled the target meanwhile: the caller's loop sees how
    moving_to = integration.head() if integration.rolling else integration.steps[-1].merge_commit
    if moving_to is not None:
        fetch_integrated(ledger, effector, current, moving_to)  # what is pushed to the remote's target

    def requested() -> bool:
        now = load_integration(ledger, integration.run_id)
        return now is not None and now.target_intent is not None

    drive(effector, current.target_intent, lambda: not requested())
    after = load_integration(ledger, integration.run_id)
    assert after is not None
    if after.target_intent is not None:
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the move of {integration.target_ref} is not known to have happened "
                                                "yet; 'docket integrate' observes again")
    if after.target is None and after.target_code == Code.TARGET_CHECKED_OUT:
        raise TargetCheckedOut(_last_target_message(ledger, integration.run_id))


def record_moved_target(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str) -> None:
    """When the target was found moved when it was to move: record who moved it, once, and (a queue that goes on)
    re-queue onto it (adapters/service_layer/merge_queue/requeue.py); nothing otherwise. Also after a crash between the
    records, before the receipt is sealed."""
    settle_moved_target(ledger, clock, effector, run_id)


def _last_target_message(ledger: Ledger, run_id: str) -> str:
    for _, event in reversed(ledger.history(integration_aggregate.stream_of(run_id))):
        if isinstance(event, ev.IntegrationTargetMoved):
            return event.message
    return "the target branch is checked out"
