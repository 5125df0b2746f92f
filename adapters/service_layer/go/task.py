"""One task's work in a `docket go` run, in its own thread and ledger session: generation after generation,
launch the agent, supervise it to its end, judge what it left (pin, required checks, handoff), and record the
task's feedback or its end. See go.py for the run as a whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ....domain import candidate as candidate_aggregate
from ....domain import run as run_aggregate
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DependenciesUnsettled, DocketError, OutcomeUnknown, Refused, RunClosed
from ...world import faults
from ..use_cases.checks import CheckInterrupted, CheckSpec
from .session import Session
from .settings import GoSettings
from ..use_cases.runs import load_run
from ..use_cases.tasks import load_task

__all__ = ["finish_task", "held_for_a_person", "judgeable", "queued_tasks", "task_worker_id", "work_on"]

JUDGED_CAUSES = frozenset({"exited", "timeout", "idle-timeout"})
ANSWER_POLL_SECONDS = 1.0  # how often a task whose agent ended asking looks for the answers
RETRY_SECONDS = 0.25  # a candidate whose queue step cannot be taken yet is judged again after this


def task_worker_id(task_id: str) -> str:
    return task_id  # one worker per task, raised a generation per attempt


def judgeable(worker: worker_aggregate.Worker) -> bool:
    """Whether the generation's end says something about the agent's work: it exited by itself, ran out of time,
    could not start, or someone stopped it on purpose. docket's own stops (pause, supervisor gone) and unknown ends
    are not judged."""
    if worker.status == "launch-failed":
        return worker.exit_cause != "cancelled"
    if worker.status != "exited":
        return False
    return worker.exit_cause in JUDGED_CAUSES or (worker.exit_cause == "stopped" and worker.stop_reason == "requested")


class _HeldForAPerson(Exception):
    """The task's candidate waits for a person (held_for_a_person): its thread ends here, freeing its slot."""


def work_on(open_session: Callable[[], Session], settings: GoSettings, run_id: str, task_id: str,
            interrupted: threading.Event | None = None) -> None:
    """Attempt the task, generation after generation, until it finishes, its run is no longer active, it waits for a
    person, or this supervisor is interrupted."""
    s = open_session()
    try:
        _work_on(s, settings, run_id, task_id, interrupted)
    except _HeldForAPerson:
        return
    except CheckInterrupted:
        if interrupted is None or not interrupted.is_set():
            raise
        return  # its check was stopped and recorded as interrupted: the generation is judged again on resume
    finally:
        s.close()


def _work_on(s: Session, settings: GoSettings, run_id: str, task_id: str,
             interrupted: threading.Event | None) -> None:
    while interrupted is None or not interrupted.is_set():
        run = load_run(s.ledger, run_id)
        task = load_task(s.ledger, task_id)
        if run.status != "active" or task.result is not None:
            return
        assert run.plan is not None
        worker = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task_worker_id(task_id)))
        if _taken_over(s, task, worker):
            continue
        if worker is not None and worker.status in ("launching", "running"):
            return  # a generation another docket process supervises, or one reconcile has not settled
        if worker is not None and worker.status == "exited" and not task.judged(worker.generation) \
                and task_id not in queued_tasks(s, run_id, worker.generation) and _ended_asking(s, task, worker):
            continue  # however it ended (by itself, stopped, its docket gone), its questions come first
        if worker is not None and judgeable(worker) and not task.judged(worker.generation):
            if task_id in queued_tasks(s, run_id, worker.generation):
                return  # its step is the integrator's: it finishes the task, or drops it and the task goes on
            _judge(s, settings, run, task, worker)
            continue
        if len(task.feedback) >= run.plan.cycles:
            last = task.feedback[-1] if task.feedback else None
            finish_task(s, task_id, "failed", None, last.code if last else "no-cycles",
                        f"{len(task.feedback)} cycle(s) spent; the last: {last.feedback if last else 'none'}")
            return
        if not _attempt(s, settings, run, task):
            return


def _taken_over(s: Session, task: task_aggregate.Task, worker: worker_aggregate.Worker | None) -> bool:
    """Whether the task's worktree, and its generation there, were just given up: they are on another host, whose
    lease on the worktree expired unrenewed (``takeover``). The next pass launches a generation here."""
    from ..use_cases.takeover import take_over, worktree_host

    here = s.effector.ports.processes.this_host()[0]
    if worktree_host(task, worker) in (None, here):
        return False
    unjudged = (worker is not None and judgeable(worker) and not task.judged(worker.generation)
                and task.task_id not in queued_tasks(s, task.run_id, worker.generation))  # queued: judged, handed off
    return take_over(s.ledger, s.clock, here, task.task_id, task_worker_id(task.task_id), unjudged=unjudged)


def _ended_asking(s: Session, task: task_aggregate.Task, worker: worker_aggregate.Worker) -> bool:
    """Whether the generation ended with questions whose answers never reached it (unanswered yet, or answered
    after it could no longer be told), and so is not judged: it waits for them (awaiting input; their deadlines apply
    meanwhile), then the next generation goes on with the answers (TaskAnswered, no cycle spent). A question that
    expired at its deadline, its policy to fail, fails the task."""
    from ..use_cases.requests import apply_deadlines, questions_of

    questions = questions_of(s.ledger, worker.worker_id, worker.generation)
    if not questions:
        return False
    expired = [q for q in questions if q.status == "expired"]
    if expired:  # its policy is to fail the task: whatever the generation did after
        finish_task(s, task.task_id, "failed", None, Code.QUESTION_EXPIRED,
                    f"question {expired[0].key} was not answered by its deadline ({expired[0].deadline_at})")
        return True
    unanswered = [q for q in questions if q.status == "open" or (q.status == "answered" and not q.delivered)]
    if not unanswered:
        return False
    if any(q.status == "open" for q in unanswered):
        if apply_deadlines(s.ledger, s.clock, [q.key for q in unanswered if q.status == "open"]):
            return True
        time.sleep(ANSWER_POLL_SECONDS)
        return True
    note = task_aggregate.answer_note([(q.question or "", q.answer or "", q.answered_by or "") for q in unanswered])

    def decision(now: str) -> list[Any]:
        return task_aggregate.record_answered(load_task(s.ledger, task.task_id), load_run(s.ledger, task.run_id),
                                              generation=worker.generation, request_keys=[q.key for q in unanswered],
                                              note=note, now=now)

    faults.crash_point("go:before-answered")
    try:
        s.ledger.decide(decision, s.clock.now())
    except RunClosed:
        pass
    return True


def _attempt(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task) -> bool:
    """Launch the next generation and supervise it to its end; False when it could not be launched for now."""
    from ..use_cases.supervisor import Limits, supervise
    from ..use_cases.workers import LaunchRequest, launch_worker

    base = None
    try:
        repair = _repair_base(s, task, settings.repository)
    except OutcomeUnknown:  # made on another machine, not fetched from the remote yet: tried again on a later pass
        time.sleep(RETRY_SECONDS)
        return False
    if repair is not None and task.worktree is not None and task.base != repair:
        from ..use_cases.housekeeping import remove_task_worktree

        faults.crash_point("go:before-repair")  # its candidate keeps the work: the worktree is made again
        remove_task_worktree(s.ledger, s.clock, s.effector, s.effector.ports.processes, task.task_id,
                             [task.feedback[-1].binding_id or ""], artifact_dir=settings.artifact_dir)
        task = load_task(s.ledger, task.task_id)
    try:
        if task.worktree is None and task.worktree_intent is None:
            base = repair or _start_commit(s, settings, run, task)
            if base is False:
                return True  # finished failed: its dependencies do not merge
            if base is None:
                _fetch_run_base(s, run, settings.repository)
        elif task.worktree is None and repair is None and task.worktree_intent is not None:
            # the merge its pending worktree starts from, written again (the same commit) if a prune took it, and
            # the intent driven at once (not after its back-off): a prune that runs again meanwhile takes it again
            if _start_commit(s, settings, run, task) is False:
                return True
            s.effector.run_pending(only={task.worktree_intent}, after=0, force=True)
    except OutcomeUnknown:  # a dependency's candidate not fetched from the remote yet: tried again on a later pass
        time.sleep(RETRY_SECONDS)
        return False
    if _worktree_backing_off(s, load_task(s.ledger, task.task_id)):
        time.sleep(RETRY_SECONDS)
        return False  # nothing recorded meanwhile: no supervision is begun for a launch that cannot go on yet
    if not _still_driving(s, run):
        time.sleep(RETRY_SECONDS)
        return False  # another host took the run over: this driver stops at its next renewal, launching nothing
    agent = settings.agent
    request = LaunchRequest(run_id=run.run_id, task_id=task.task_id, worker_id=task_worker_id(task.task_id),
                            agent=agent.name, command=agent.command, prompt_mode=agent.prompt_mode, env=agent.env,
                            env_allow=agent.env_allow, setup=settings.setup, include=settings.include,
                            ports=settings.ports, artifact_dir=settings.artifact_dir, pin_on_exit=False,
                            base=base or None, report=agent.report, workspace_root=settings.workspace_root,
                            confinement=agent.confinement, inbox=settings.inbox)
    faults.crash_point("go:before-launch")
    try:
        launched = launch_worker(s.ledger, s.clock, s.effector, s.effector.ports.launcher, request,
                                 docket_dir=settings.docket_dir, repository=settings.repository,
                                 main_checkout=settings.main_checkout, ledger_path=settings.ledger_path)
    except RunClosed:
        return False
    except OutcomeUnknown:
        if load_task(s.ledger, task.task_id).worktree is not None:
            raise  # the launch itself: recovering it is replay's ('docket go --resume' recovers first)
        # its worktree is not known to be made yet (e.g. a branch lock a killed docket left, stale after
        # ref_locks.STALE_LOCK_SECONDS): observed again on a later pass, as every unknown outcome is; the run goes on
        time.sleep(RETRY_SECONDS)
        return False
    except Refused as e:
        if e.code in (Code.WORKER_RUNNING, Code.LAUNCHED_ELSEWHERE, Code.LEASE_HELD, Code.LEASE_HOLDER_UNKNOWN,
                      Code.WORKTREE_ELSEWHERE):
            return False
        raise
    except DocketError as e:
        if e.code == Code.SETUP_FAILED:
            finish_task(s, task.task_id, "failed", None, Code.SETUP_FAILED, e.message)
            return True
        raise
    supervise(s.ledger, s.clock, s.effector, [(launched, Limits(agent.timeout_ms, agent.idle_timeout_ms, agent.max_log))],
              supervisions=launched.supervisions)
    faults.crash_point("go:after-agent")
    return True


def _worktree_backing_off(s: Session, task: task_aggregate.Task) -> bool:
    """Whether the task's pending worktree intent was last observed unknown and asked to wait (its retry_at)."""
    if task.worktree is not None or task.worktree_intent is None:
        return False
    unknowns = [event for _, event in s.ledger.history(task_aggregate.stream_of(task.task_id))
                if getattr(event, "intent_id", None) == task.worktree_intent and hasattr(event, "retry_at")]
    retry_at = unknowns[-1].retry_at if unknowns else None  # on the task's own stream: no scan of the ledger
    return retry_at is not None and s.clock.now() < retry_at


def queued_tasks(s: Session, run_id: str, generation: int | None = None) -> frozenset[str]:
    """The tasks whose candidate waits in the run's merge queue (queued, not yet verified or dropped); of that
    generation only, when given."""
    from ..use_cases.integration import load_integration

    integration = load_integration(s.ledger, run_id)
    if integration is None or not integration.rolling or (integration.ended and not integration.moved_unrecorded()):
        return frozenset()  # a queue whose target move found the target moved goes on once re-queued onto it
    return frozenset(step.task_id for step in integration.steps
                     if step.status not in ("verified", "conflicted", "rejected", "requeued")
                     and generation in (None, step.generation))


def _still_driving(s: Session, run: run_aggregate.Run) -> bool:
    """Whether this host still drives the run (its driver lease not taken over); a run on a ledger file has one
    host, which always does."""
    if run.remote is None:
        return True
    from ..use_cases.takeover import drives_here

    return drives_here(s.ledger, load_run(s.ledger, run.run_id), s.effector.ports.processes.this_host()[0])


def _repair_base(s: Session, task: task_aggregate.Task, repository: Path) -> str | None:
    """The integrated head a repair starts from: when the task's last feedback says its step was dropped from the
    merge queue, the head that step did not go onto (in repository, where the task's worktree is made: fetched from
    the remote when another machine's queue made it)."""
    from ..use_cases.integration import fetch_integrated, load_integration

    last = task.feedback[-1] if task.feedback else None
    if last is None or last.code not in (Code.INTEGRATION_CONFLICT, Code.INTEGRATION_REJECTED):
        return None
    integration = load_integration(s.ledger, task.run_id)
    if integration is None:
        return None
    dropped = [step for step in integration.steps if step.task_id == task.task_id
               and step.binding_id == last.binding_id and step.base is not None]
    if not dropped:
        return None
    base = dropped[-1].base
    assert base is not None
    fetch_integrated(s.ledger, s.effector, integration, base, repository=repository)
    return base


def _fetch_run_base(s: Session, run: run_aggregate.Run, repository: Path) -> None:
    """The run's base in repository: with a shared remote, fetched from its target branch there when this clone
    does not have it yet (the base was read there on another machine). OutcomeUnknown while it cannot be."""
    if run.remote is None or run.base_commit is None:
        return
    if not s.effector.ports.remotes.fetch(repository, *run.remote, f"refs/heads/{run.target_branch}",
                                          run.base_commit, reaching=True):
        raise OutcomeUnknown(Code.REMOTE_UNREACHABLE, f"the run's base {run.base_commit} is not here and cannot be "
                                                   f"fetched from the remote {run.remote[0]} yet")


def _start_commit(s: Session, settings: GoSettings, run: run_aggregate.Run,
                  task: task_aggregate.Task) -> str | bool | None:
    """Where a new worktree of the task starts: None for the run's base; for a task that depends on others, the
    merge of their passed candidates onto the base, in task order (False: they conflict, and the task failed)."""
    assert run.plan is not None and run.base_commit is not None
    depends_on = run.plan.depends_on(task.task_id)
    if not depends_on:
        return None
    head = run.base_commit
    for dependency in depends_on:
        binding = load_task(s.ledger, dependency).finished_binding
        candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding or ""))
        if candidate is None or candidate.commit is None:
            finish_task(s, task.task_id, "failed", None, "dependency-missing", f"{dependency} has no candidate")
            return False
        message = f"docket: start {task.task_id} from {dependency}\n\nDocket-Run: {run.run_id}\n"
        if run.remote is not None and not s.effector.ports.remotes.fetch(settings.repository, *run.remote,
                                                                         candidate.ref, candidate.commit):
            raise OutcomeUnknown(Code.REMOTE_UNREACHABLE, f"{dependency}'s candidate {candidate.commit} cannot be "
                                                       f"fetched from the remote {run.remote[0]} yet")
        merged = s.effector.ports.merges.merge_candidate(settings.repository, head, candidate.commit, message)
        if merged.state in ("merged", "already-merged") and merged.commit:
            head = merged.commit
            continue
        finish_task(s, task.task_id, "failed", None, "dependency-conflict",
                f"the work of {', '.join(depends_on)} does not merge ({merged.state}): "
                f"{', '.join(merged.conflicts[:10]) or merged.detail}")
        return False
    return head


def _judge(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task,
           worker: worker_aggregate.Worker) -> None:
    """Judge a generation that ended: pass the task (its candidate checked and handed off) or record feedback."""
    generation = worker.generation
    if worker.status == "launch-failed":
        _feedback(s, task, generation, "launch-failed", None, None, _worker_tail(s, worker) or "it could not start")
        return
    if worker.exit_cause in ("timeout", "idle-timeout"):
        what = "ran out of time" if worker.exit_cause == "timeout" else "printed nothing for too long"
        _feedback(s, task, generation, f"agent-{worker.exit_cause}", None, None,
                  f"the agent {what} and was stopped\n{_worker_tail(s, worker)}")
        return
    if worker.exit_cause == "stopped" or worker.exit_code != 0:
        how = "was stopped on request" if worker.exit_cause == "stopped" else f"exited {worker.exit_code}"
        _feedback(s, task, generation, "agent-failed", None, None, f"the agent {how}\n{_worker_tail(s, worker)}")
        return
    candidate = _pin(s, settings, run, task, generation)
    if candidate is None:
        return
    faults.crash_point("go:after-pin")
    for spec in settings.required:
        result, feedback = _check(s, settings, run.run_id, candidate.binding_id, spec)
        if result != "passed":
            _feedback(s, task, generation, "check-failed", spec.name, candidate.binding_id, feedback, composed=True)
            return
        result, feedback = _check_base_tests(s, settings, candidate, spec)
        if result != "passed":
            _feedback(s, task, generation, Code.BASE_TESTS_FAILED, spec.name, candidate.binding_id, feedback,
                      composed=True)
            return
    faults.crash_point("go:before-handoff")
    _hand_off(s, settings, task, candidate)


def _pin(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task,
         generation: int) -> candidate_aggregate.Candidate | None:
    from ..use_cases.candidates import pin_task

    try:
        pinned = pin_task(s.ledger, s.clock, s.effector, run.run_id, task.task_id, artifact_dir=settings.artifact_dir,
                          max_file_size=settings.max_file_size,
                          worker_id=task_worker_id(task.task_id), generation=generation)
    except RunClosed:
        return None
    except OutcomeUnknown:
        return None  # the pin's outcome is not known yet (its remote unreachable, say): judged again on a next pass
    except DocketError as e:
        _feedback(s, task, generation, "pin-failed", None, None, f"{e.code}: {e.message}")
        return None
    if pinned.result == "unchanged":
        _feedback(s, task, generation, "no-changes", None, None, "the agent changed nothing in its worktree")
        return None
    if pinned.result == "unstable":
        _feedback(s, task, generation, "unstable", None, None,
                  "files kept changing after the agent exited: " + ", ".join(pinned.differing[:20]))
        return None
    candidate = pinned.candidate
    if candidate is None or candidate.status != "pinned":
        status = candidate.status if candidate else "missing"
        if status in ("pinning",):
            return None  # its outcome is unknown for now: judged again on the next pass
        _feedback(s, task, generation, "pin-failed", None, None, f"the candidate is {status}")
        return None
    return candidate


def _check(s: Session, settings: GoSettings, run_id: str, binding: str, spec: CheckSpec) -> tuple[str, str]:
    """The required check's result on the candidate (one recorded under this configuration, or a new run), and the
    feedback for the agent when it did not pass, with a note when the check fails on the run's base too (the base
    is checked once a candidate fails, or before, when it is judged relative to the base)."""
    from ....domain.check import concluded
    from ..use_cases.base_checks import check_base, run_check

    candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
    assert candidate is not None
    done = concluded(candidate, spec.name, spec.config_sha256)  # recorded before a crash: never run twice
    if done is None:
        outcome = run_check(s.ledger, s.clock, s.effector, binding, spec, artifact_dir=settings.artifact_dir,
                            docket_dir=settings.docket_dir, ledger_path=settings.ledger_path)
        candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
        assert candidate is not None
        done = candidate.check_run(outcome.check_id)
    if done.result == "passed":
        return "passed", ""
    try:
        base = check_base(s.ledger, s.clock, s.effector, run_id, spec, repository=settings.repository,
                          artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                          ledger_path=settings.ledger_path)
    except CheckInterrupted:
        raise  # the feedback waits for the base's result: the generation is judged again on resume
    except DocketError:
        base = None  # the note is left out; the candidate's own result stands
    return done.result or "failed", _run_feedback(s, binding, done, spec, base_result=base.result if base else None,
                                                  base_code=base.code if base else None)


def _run_feedback(s: Session, binding: str, done: candidate_aggregate.CheckRun, spec: CheckSpec, *,
                  base_result: str | None = None, base_code: str | None = None) -> str:
    """The feedback of a check run that did not pass: its failing tests by its report, else its output's end."""
    from ....domain.containment.processes import bounded_tail
    from ....domain.task import check_feedback
    from ...world.files.logs import known_secrets, log_summary

    tail = next((getattr(e, "tail", "") for _, e in reversed(s.ledger.history(candidate_aggregate.stream_of(binding)))
                 if getattr(e, "check_id", None) == done.check_id and getattr(e, "tail", None) is not None), "")
    if done.log_path and _tests_unusable(done):  # the end of its output, more of it than the event keeps
        tail = bounded_tail(log_summary(Path(done.log_path)).end, max_lines=60, max_chars=3500,
                            secrets=known_secrets()) or tail
    return check_feedback(spec.name, done.result or "failed", done.result_code, done.tests, tail,
                          message=done.result_message, base_result=base_result, base_code=base_code)


def _check_base_tests(s: Session, settings: GoSettings, candidate: candidate_aggregate.Candidate,
                      spec: CheckSpec) -> tuple[str, str]:
    """The required check's result on the candidate's base-tests tree (base_tests.py: the candidate's code with the
    base's copy of the check's protected paths), when the candidate has one; "passed" when it has none. The feedback
    says the base's tests fail on the agent's code, and which paths of its it set aside."""
    from ....domain.reports.junit import escaped
    from ....domain.containment.protected import protected_changes
    from ....domain.task import MAX_FEEDBACK_CHARS
    from ..use_cases.base_tests import check_base_tests

    tested = check_base_tests(s.ledger, s.clock, s.effector, candidate.binding_id, spec,
                              artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                              ledger_path=settings.ledger_path)
    if tested is None or tested.result == "passed":
        return "passed", ""
    changed = protected_changes(candidate.changed_paths, spec.protected)
    head = (f"{spec.name} passed on your candidate, but the base's tests fail on your code: docket ran {spec.name} "
            f"again with the run's base's copy of its protected paths ({', '.join(spec.protected)}), and it "
            f"{tested.result}. Deleting, skipping or rewriting a test does not make a check pass; make the code "
            "pass the base's tests"
            + (f" (you changed {escaped(', '.join(changed[:10]))}{', ...' if len(changed) > 10 else ''})"
               if changed else "") + ".\n")
    body = _run_feedback(s, tested.binding_id, tested.run, spec)
    return tested.result, (head + body)[:MAX_FEEDBACK_CHARS]


def _tests_unusable(run: candidate_aggregate.CheckRun) -> bool:
    return run.tests is None or run.tests.problem is not None or not run.tests.failing


def _hand_off(s: Session, settings: GoSettings, task: task_aggregate.Task,
              candidate: candidate_aggregate.Candidate) -> None:
    from ..use_cases.handoff import confirm_handoff, offer_handoff

    current = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(candidate.binding_id))
    assert current is not None
    if current.handoff is None:
        current = offer_handoff(s.ledger, s.clock, candidate.binding_id)
    if current.handoff in ("offered",):
        required = {spec.name: spec.config_sha256 for spec in settings.required}
        current = confirm_handoff(s.ledger, s.clock, s.effector, candidate.binding_id, required)
    if current.handoff == "confirmed" and not settings.approval:
        if _waits_for_a_person(s, task, current):
            raise _HeldForAPerson
        _queue(s, settings, task, current)
    elif current.handoff == "confirmed":
        finish_task(s, task.task_id, "passed", candidate.binding_id, None, None)
    else:
        _feedback(s, task, candidate.generation or 0, "handoff-rejected", None, candidate.binding_id,
                  f"the handoff of candidate {candidate.binding_id[:12]} was {current.handoff}")


_announced: set[str] = set()  # the candidates this process said wait for a person, said once
_held: dict[str, str] = {}  # task -> its candidate waiting for a person: the task's thread ended, its slot is free
_held_lock = threading.Lock()


def held_for_a_person(s: Session, run_id: str, task_id: str) -> bool:
    """Whether the task waits for a person's approval of its candidate (held without a thread or a --parallel slot,
    like a queued task); False once the approval is recorded, so its next thread queues it."""
    from ..use_cases.integration import load_integration

    with _held_lock:
        binding_id = _held.get(task_id)
    if binding_id is None:
        return False
    integration = load_integration(s.ledger, run_id)
    if integration is not None and binding_id in integration.approved():
        with _held_lock:
            _held.pop(task_id, None)
        return False
    return True


def _waits_for_a_person(s: Session, task: task_aggregate.Task, candidate: candidate_aggregate.Candidate) -> bool:
    """Whether the candidate changes a path the run trusts (domain/containment/trust.py) and no person has approved it yet: it
    then waits, listed in 'docket inbox', and the task is judged again after a pause (its checks are not run
    again)."""
    from ....domain.containment.trust import trusted_changes
    from ..use_cases.integration import load_integration

    held = trusted_changes(candidate.changed_paths, load_run(s.ledger, task.run_id).trusted_paths)
    if not held:
        return False
    integration = load_integration(s.ledger, task.run_id)
    if integration is not None and candidate.binding_id in integration.approved():
        return False
    if candidate.binding_id not in _announced:
        _announced.add(candidate.binding_id)
        _warn("config-change", f"task {task.task_id}'s candidate {candidate.binding_id[:12]} passed its checks "
                                   f"but changes {', '.join(held[:5])}, which the run trusts: it waits for a person "
                                   f"('docket inbox'; 'docket approve {task.run_id} --task {task.task_id} --by NAME')")
    with _held_lock:
        _held[task.task_id] = candidate.binding_id
    return True


def _warn(code: str, message: str) -> None:
    """One line on stderr, as the CLI's warnings read; a stderr that cannot be written loses the line, not the run."""
    import sys

    try:
        sys.stderr.write(f"docket: warning: {code}: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _queue(s: Session, settings: GoSettings, task: task_aggregate.Task,
           candidate: candidate_aggregate.Candidate) -> None:
    """Queue the passed candidate for integration now; the integrator finishes the task once its step is
    verified. A queue fixed already (by 'docket integrate'), or stopped, takes no step: the task has passed."""
    from ..use_cases.integration import queue_task

    run = load_run(s.ledger, task.run_id)
    assert run.plan is not None
    try:
        queue_task(s.ledger, s.clock, s.effector, task.run_id, task.task_id, candidate.binding_id, checks=settings.checks,
                   depends_on=run.plan.depends_on(task.task_id))
    except RunClosed:
        pass
    except DependenciesUnsettled:
        time.sleep(RETRY_SECONDS)  # judged again on the next pass (its checks are not run twice)
    except Refused as e:
        if e.code not in (Code.QUEUE_FIXED, Code.QUEUE_STOPPED):
            raise
        finish_task(s, task.task_id, "passed", candidate.binding_id, None, None)


def _feedback(s: Session, task: task_aggregate.Task, generation: int, code: str, check: str | None,
              binding: str | None, text: str, *, composed: bool = False) -> None:
    """Record why the generation failed; text is cut to its end (composed: bounded and escaped already)."""
    from ....domain.containment.processes import bounded_tail
    from ...world.files.logs import known_secrets

    feedback = (text if composed else bounded_tail(text.encode("utf-8", "replace"), max_lines=40,
                                                   max_chars=3000, secrets=known_secrets())) or code

    def decision(now: str) -> list[Any]:
        return task_aggregate.record_feedback(load_task(s.ledger, task.task_id), load_run(s.ledger, task.run_id),
                                              generation=generation, code=code, check=check, binding_id=binding,
                                              feedback=feedback, now=now)

    faults.crash_point("go:before-feedback")
    try:
        s.ledger.decide(decision, s.clock.now())
    except RunClosed:
        pass
    except Refused as e:
        if e.code != Code.TASK_FINISHED:
            raise


def finish_task(s: Session, task_id: str, result: str, binding: str | None, code: str | None,
                message: str | None) -> None:
    def decision(now: str) -> list[Any]:
        task = load_task(s.ledger, task_id)
        return task_aggregate.finish(task, load_run(s.ledger, task.run_id), result=result, binding_id=binding,
                                     code=code, message=message, now=now)

    try:
        s.ledger.decide(decision, s.clock.now())
    except RunClosed:
        pass


def _worker_tail(s: Session, worker: worker_aggregate.Worker) -> str:
    """The tail of the generation's log as WorkerExited recorded it."""
    for _, event in reversed(s.ledger.history(worker_aggregate.stream_of(worker.worker_id))):
        if getattr(event, "generation", None) == worker.generation and hasattr(event, "tail"):
            return event.tail or ""
    return ""


def task_ids(run: run_aggregate.Run) -> Sequence[str]:
    return run.plan.task_ids if run.plan is not None else ()
