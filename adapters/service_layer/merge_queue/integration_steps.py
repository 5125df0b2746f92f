"""Use case: the steps of a run's merge queue: each candidate merged, verified by the required checks, completed."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.merge_queue import integration as integration_aggregate
from ....domain import events as ev
from ....domain.check import concluded
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import OutcomeUnknown, Refused
from ....domain.merge_queue.merges import merge_message, trailers
from ....domain.run import require_open
from ...world import faults
from ...world.clock import Clock, new_id
from ..use_cases.base_checks import run_check
from ..use_cases.candidates import drive, load_candidate, pin_tree
from ..use_cases.checks import CheckSpec
from ..kernel.ledger import Ledger
from ..use_cases.runs import load_run

if TYPE_CHECKING:
    from ....domain import candidate as candidate_aggregate
    from ....domain.run import Run
    from ..kernel.ports import EffectorPort

__all__ = ["check_probe", "fetch_integrated", "integration_ref", "load_integration", "pin_probe", "probe_turn"]


def integration_ref(run_id: str) -> str:
    return f"refs/docket/integrations/{run_id}"


def load_integration(ledger: Ledger, run_id: str) -> integration_aggregate.Integration | None:
    return ledger.get(integration_aggregate.apply, integration_aggregate.stream_of(run_id))


def _merge_step(ledger: Ledger, clock: Clock, effector: EffectorPort, integration: integration_aggregate.Integration,
                step: integration_aggregate.StepState, batch_size: int = 1) -> bool:
    """Compute the step's merge in the object store (onto the open batch's last merge, if any), then record its
    conflict or its intent, and drive it. False, with nothing recorded, when it conflicts with an open batch: the
    batch is checked first, and the step merged onto what of it is verified (its conflict, if any, is with
    verified work only)."""
    assert integration.repository is not None
    head = integration.tip()
    message = merge_message(f"docket: integrate task {step.task_id} of run {integration.run_id}",
                            trailers(integration.run_id, step.task_id, step.worker_id, step.generation,
                                     step.binding_id))
    _fetch_candidate(ledger, effector, integration, step)
    fetch_integrated(ledger, effector, integration, head)
    merged = effector.ports.merges.merge_candidate(effector.local(integration.repository), head, step.commit,
                                                   message)
    faults.crash_point("integrate:after-merge-computed")
    if merged.state == "unreadable":
        raise OutcomeUnknown(Code.REPOSITORY_UNREADABLE, f"step {step.step} cannot be merged: {merged.detail}")
    if merged.state in ("conflicted", "unmergeable") and integration.open_batch():
        return False
    intent_id = new_id("integrate")
    repair = ""
    if integration.rolling and merged.state in ("conflicted", "unmergeable"):
        repair = _conflict_feedback(effector.local(integration.repository), head, step, merged)

    def decision(now: str) -> list[ev.Event]:
        current = load_integration(ledger, integration.run_id)
        assert current is not None
        run = load_run(ledger, integration.run_id)
        require_open(run)  # an aborted run's queue goes no further
        if merged.state in ("conflicted", "unmergeable"):
            paths = merged.conflicts
            dropped = integration_aggregate.conflicted(
                current, step.step, head=head, reason=merged.state, paths=paths,
                message=(f"task {step.task_id}'s candidate does not merge into {head}: "
                         + (", ".join(paths[:20]) if paths else merged.detail)), now=now)
            return dropped + _repair(ledger, run, step, "integration-conflict", repair, dropped, now)
        state, commit, tree = merged.state, merged.commit, merged.tree
        assert (state == "merged" or state == "already-merged") and commit is not None and tree is not None
        return integration_aggregate.request_step(current, step.step, intent_id=intent_id,
                                                  head=current.ref_from() if current.rolling else head,
                                                  merge_commit=commit, tree=tree, merge=state,
                                                  now=now, merged_onto=head if merged.state == "merged" else None,
                                                  merge_message=message if merged.state == "merged" else None,
                                                  batch_size=batch_size, remote=run.remote)

    ledger.decide(decision, clock.now())
    current = load_integration(ledger, integration.run_id)
    assert current is not None
    if current.step(step.step).status == "merging":
        _drive_step(ledger, effector, integration.run_id, current.step(step.step))
    return True


def _fetch_candidate(ledger: Ledger, effector: EffectorPort, integration: integration_aggregate.Integration,
                     step: integration_aggregate.StepState) -> None:
    """With a shared remote, the step's candidate as the remote has it (pinned on another machine, it is only
    there); OutcomeUnknown while the remote cannot give it. Nothing is fetched when it is here already."""
    remote = load_run(ledger, integration.run_id).remote
    if remote is None:
        return
    assert integration.repository is not None
    ref = load_candidate(ledger, step.binding_id).ref
    if not effector.ports.remotes.fetch(effector.local(integration.repository), remote[0], remote[1], ref,
                                        step.commit):
        raise OutcomeUnknown(Code.REMOTE_UNREACHABLE, f"step {step.step}'s candidate {step.commit} cannot be fetched "
                                                   f"from the remote {remote[0]} ({remote[1]}) yet")


def fetch_integrated(ledger: Ledger, effector: EffectorPort, integration: integration_aggregate.Integration,
                     commit: str, *, repository: Path | None = None) -> None:
    """With a shared remote, a commit of the queue (a step's merge, the head a step went onto, the commit the queue
    went on from) brought into repository (default: where this machine integrates) when it is not there: made on
    another machine, it is on the remote, in the history of the run's integration ref or of its target branch
    there. OutcomeUnknown while the remote cannot give it."""
    remote = load_run(ledger, integration.run_id).remote
    if remote is None:
        return
    assert integration.repository is not None and integration.integration_ref is not None
    repository = repository or effector.local(integration.repository)
    remotes = effector.ports.remotes
    for ref in (integration.integration_ref, integration.target_ref):
        if ref and remotes.fetch(repository, remote[0], remote[1], ref, commit, reaching=True):
            return
    raise OutcomeUnknown(Code.REMOTE_UNREACHABLE, f"the integrated commit {commit} of run {integration.run_id} is not "
                                               f"here and cannot be fetched from the remote {remote[0]} yet")


def _conflict_feedback(repository: Path, head: str, step: integration_aggregate.StepState, merged: Any) -> str:
    """What the task's agent is told when its candidate does not merge into the integrated head."""
    from ....domain.containment.processes import redact
    from ...world.git.conflicts import conflict_hunks
    from ...world.files.logs import known_secrets

    paths = list(merged.conflicts)
    named = ", ".join(paths[:20]) + (f" and {len(paths) - 20} more" if len(paths) > 20 else "")
    # the files' lines reach the ledger in the feedback: redacted like any output docket keeps
    hunks = redact(conflict_hunks(repository, head, step.commit, paths), known_secrets()) if paths else ""
    named, hunks = _cut(named, 600), _cut(hunks, 2800)  # the feedback keeps 4,000 characters: the words first
    return (f"your work conflicts with work integrated before it, on {named or merged.detail}. Your worktree now "
            "starts from the integrated head: keep what it has in those files and make your change again on top "
            "of it." + (f"\nThe integrated head ('-') and your candidate ('+') there:\n{hunks}" if hunks else ""))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _repair(ledger: Ledger, run: Run, step: integration_aggregate.StepState, code: str, text: str,
            dropped: Sequence[ev.Event], now: str) -> list[ev.Event]:
    """In a queue that goes on, with the step dropped: the task's feedback, so its agent repairs it (a cycle)."""
    from ....domain import task as task_aggregate

    if not dropped or not load_integration(ledger, run.run_id).rolling:  # type: ignore[union-attr]
        return []
    task = ledger.get(task_aggregate.apply, task_aggregate.stream_of(step.task_id))
    if task is None or task.result is not None:
        return []
    return task_aggregate.record_feedback(task, run, generation=step.generation, code=code, check=None,
                                          binding_id=step.binding_id, feedback=text, now=now)


def _drive_step(ledger: Ledger, effector: EffectorPort, run_id: str, step: integration_aggregate.StepState) -> None:
    assert step.intent_id is not None

    def step_now() -> integration_aggregate.StepState:
        current = load_integration(ledger, run_id)
        assert current is not None
        return current.step(step.step)

    integration = load_integration(ledger, run_id)
    assert integration is not None and integration.repository is not None
    merged_onto = integration.tip()  # the head the merge was computed on (integration.tip() moves with the step)
    repository = effector.local(integration.repository)
    # asked for on a machine that is gone: what it merged is on the remote
    _fetch_candidate(ledger, effector, integration, step)
    fetch_integrated(ledger, effector, integration, merged_onto)
    _complete_merge(effector, repository, run_id, step, merged_onto)  # a prune may have taken it before the ref moves
    drive(effector, step.intent_id, lambda: step_now().status != "merging")
    _complete_merge(effector, repository, run_id, step, merged_onto)  # or after, having looked before it moved
    if step_now().status == "merging":
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the move of {integration_ref(run_id)} for step {step.step} is not "
                                                "known to have happened yet; 'docket integrate' observes again")


def _complete_merge(effector: EffectorPort, repository: Path, run_id: str, step: integration_aggregate.StepState,
                    head: str) -> list[str]:
    """Every object the step's merge commit reaches in the repository: what a prune deleted (a merge's objects are
    written before the integration ref names them) is computed again, byte for byte; the ids still missing."""
    if step.merge != "merged" or step.merge_commit is None:
        return []
    merges = effector.ports.merges
    parents = [head, step.commit]
    missing = merges.missing_objects(repository, [step.merge_commit], parents)
    if missing:
        message = merge_message(f"docket: integrate task {step.task_id} of run {run_id}",
                                trailers(run_id, step.task_id, step.worker_id, step.generation, step.binding_id))
        merges.merge_candidate(repository, head, step.commit, message)
        missing = merges.missing_objects(repository, [step.merge_commit], parents)
    return missing


def complete_merges(ledger: Ledger, effector: EffectorPort, run_id: str) -> list[str]:
    """Every merged step's merge commit made whole again in the repository (computed again from its recorded head
    and candidate); the ids still missing."""
    integration = load_integration(ledger, run_id)
    if integration is None or integration.repository is None:
        return []
    repository, left = effector.local(integration.repository), []
    for step in integration.steps:
        if step.head is not None:
            left += _complete_merge(effector, repository, run_id, step, step.head)
    return sorted(set(left))


def pin_probe(ledger: Ledger, clock: Clock, effector: EffectorPort, integration: integration_aggregate.Integration,
              probe: Sequence[integration_aggregate.StepState]) -> candidate_aggregate.Candidate:
    """The merged tree of the probe's last step pinned as a candidate of its task (boundary integration-<step>;
    the same probe gives the same candidate, pinned once)."""
    step = probe[-1]
    assert integration.repository is not None and step.merge_commit is not None and step.tree is not None
    assert integration.integration_ref is not None
    from ...world.files.paths import integration_output_path
    from ...world.files.files import own_folder

    fetch_integrated(ledger, effector, integration, step.merge_commit)
    boundary = f"integration-{step.step}"
    output = integration_output_path(effector.local(integration.repository), integration.run_id, boundary)
    own_folder(effector.local(integration.repository) / "docket", output)
    return pin_tree(ledger, clock, effector, integration.run_id, step.task_id,
                    repository=effector.local(integration.repository), parent=step.merge_commit, tree=step.tree,
                    boundary=boundary, source=integration.integration_ref, output=output,
                    changed_since=probe[0].head)


_turns: dict[tuple[str, str], threading.Lock] = {}
_turns_guard = threading.Lock()


def probe_turn(ledger: Ledger, binding: str) -> threading.Lock:
    """Held while a check runs on the queue's candidate binding in this process: a verification's thread and the
    integrator recording its verdict never run one check twice at once."""
    with _turns_guard:
        if len(_turns) > 10_000:
            _turns.clear()
        return _turns.setdefault((str(ledger.path), binding), threading.Lock())


def check_probe(ledger: Ledger, clock: Clock, effector: EffectorPort, integration: integration_aggregate.Integration,
                probe: Sequence[integration_aggregate.StepState], binding: str, required: Sequence[CheckSpec], *,
                artifact_dir: str | None, docket_dir: Path, ledger_path: Path
                ) -> tuple[list[ev.CheckBinding], tuple[CheckSpec, candidate_aggregate.CheckRun] | None]:
    """Every required check of the queue on the candidate (a result recorded there is reused, never run twice),
    in order, to the first that does not pass: the ones passed, and that one with its run (None: all passed)."""
    passed: list[ev.CheckBinding] = []
    wanted = {c.check: c.config_sha256 for c in integration.required_checks}
    for spec in required:
        if spec.name not in wanted:
            continue  # configured as required after the queue was fixed: the queue checks what it was fixed with
        if spec.config_sha256 != wanted[spec.name]:
            raise Refused(Code.CHECK_CONFIG_CHANGED, f"check {spec.name}'s configuration changed since the integration "
                                                  f"of run {integration.run_id} was prepared; restore it to go on")
        with probe_turn(ledger, binding):
            done = concluded(load_candidate(ledger, binding), spec.name, wanted[spec.name])
            if done is None:
                outcome = run_check(ledger, clock, effector, binding, spec, artifact_dir=artifact_dir,
                                    docket_dir=docket_dir, ledger_path=ledger_path)
                done = load_candidate(ledger, binding).check_run(outcome.check_id)
        if done.result != "passed":
            return passed, (spec, done)
        passed.append(ev.CheckBinding(check=spec.name, check_id=done.check_id, config_sha256=done.config_sha256,
                                      output_sha256=done.output_sha256))
    return passed, None


def _verify_step(ledger: Ledger, clock: Clock, effector: EffectorPort, integration: integration_aggregate.Integration,
                 probe: Sequence[integration_aggregate.StepState], required: Sequence[CheckSpec], *,
                 artifact_dir: str | None, docket_dir: Path, ledger_path: Path, batched: bool = False) -> None:
    """Pin the merged tree of the probe's last step as a candidate of its task, run every required check on it
    (a result recorded there is reused, never run twice), and record the verdict on the probe's steps: verified,
    or (one step) rejected, or (several: a batch) failed, to be bisected."""
    step = probe[-1]
    assert step.tree is not None
    tree = step.tree
    first = probe[0]
    known = integration.known_to_fail(probe)
    result: str | None
    detail: str | None
    failing: tuple[CheckSpec, candidate_aggregate.CheckRun] | None = None
    passed: list[ev.CheckBinding] = []
    if known is not None:  # the failing batch's check ran on this very merge: rejected on that run, not run again
        binding, check, check_id, code = known
        result, detail = "failed", code
    else:
        binding = pin_probe(ledger, clock, effector, integration, probe).binding_id
        wanted = {c.check for c in integration.required_checks}
        passed, failing = check_probe(ledger, clock, effector, integration, probe, binding, required,
                                      artifact_dir=artifact_dir, docket_dir=docket_dir, ledger_path=ledger_path)
        if failing is not None:
            spec, run = failing
            check, check_id = spec.name, run.check_id
            code, result, detail = run.result_code or run.result or "check-failed", run.result, run.result_code
    if known is not None or failing is not None:
        faults.crash_point("integrate:before-rejected")

        def rejection(now: str) -> list[ev.Event]:
            current = load_integration(ledger, integration.run_id)
            assert current is not None
            if len(probe) > 1:
                return integration_aggregate.batch_failed(
                    current, first.step, step.step, verification_binding=binding, tree=tree,
                    check=check, check_id=check_id, code=code,
                    message=(f"check {check} {result} on the merge of steps {first.step}..{step.step} "
                             f"(tasks {', '.join(s.task_id for s in probe)})"
                             + (f": {detail}" if detail else "")), now=now)
            message = (f"check {check} {result} on the merge of step {step.step} (task {step.task_id})"
                       + (f": {detail}" if detail else ""))
            dropped = integration_aggregate.rejected(
                current, step.step, verification_binding=binding, check=check, check_id=check_id,
                code=code, message=message, now=now)
            if not dropped:
                return []
            after = integration_aggregate.apply(current, dropped[0], 0)
            again = integration_aggregate.requeue_after(after, step.step, now)
            text = (f"{message}: your work passed on its own but not merged with the work integrated before it"
                    + (_merged_with(current) if batched else "") + ". Your worktree now starts from the "
                    "integrated head: keep what it has and make your change again on top of it.")
            return dropped + again + _repair(ledger, load_run(ledger, integration.run_id), step,
                                             "integration-rejected", text, dropped, now)

        ledger.decide(rejection, clock.now())
        if len(probe) > 1:
            faults.crash_point("integrate:after-batch-failed")
        return
    if set(wanted) - {c.check for c in passed}:
        missing = sorted(set(wanted) - {c.check for c in passed})
        raise Refused(Code.CHECK_NOT_CONFIGURED, f"the queue requires check(s) {', '.join(missing)}, which docket.toml "
                                              "no longer configures")
    faults.crash_point("integrate:before-verified")

    def verification(now: str) -> list[ev.Event]:
        current = load_integration(ledger, integration.run_id)
        assert current is not None
        if len(probe) > 1:
            made = integration_aggregate.batch_verified(current, first.step, step.step, verification_binding=binding,
                                                        tree=tree, checks=passed, now=now)
        else:
            made = integration_aggregate.verified(current, step.step, verification_binding=binding, tree=tree,
                                                  checks=passed, now=now)
        if not made or not current.rolling:
            return made
        return made + [e for s in probe for e in _delivered_task(ledger, s, now)]

    ledger.decide(verification, clock.now())


def _merged_with(integration: integration_aggregate.Integration) -> str:
    """What a batch's rejected step was merged with: the integrated head it went onto (which passed the checks),
    and the tasks whose work reached it last."""
    head = integration.head()
    landed = [s.task_id for s in integration.steps if s.status == "verified"]
    recent = ", ".join(landed[-10:]) + (f" and {len(landed) - 10} earlier" if len(landed) > 10 else "")
    return (f" (merged onto {head}, on which the checks passed" + (f", holding the work of tasks {recent}"
                                                                    if landed else "") + ")")


def _delivered_task(ledger: Ledger, step: integration_aggregate.StepState, now: str) -> list[ev.Event]:
    """In a queue that goes on, with the step verified: its task has passed (TaskFinished)."""
    from ....domain import task as task_aggregate

    task = ledger.get(task_aggregate.apply, task_aggregate.stream_of(step.task_id))
    if task is None:
        return []
    return task_aggregate.finish(task, load_run(ledger, task.run_id), result="passed", binding_id=step.binding_id,
                                 code=None, message=None, now=now)
