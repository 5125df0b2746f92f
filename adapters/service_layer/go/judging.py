"""What a task's agent left, judged: pinned, checked, queued or held for a person; a task's end recorded."""

from __future__ import annotations

import threading
import time
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

__all__ = ["finish_task", "held_for_a_person", "task_worker_id"]


RETRY_SECONDS = 0.25  # a candidate whose queue step cannot be taken yet is judged again after this


def task_worker_id(task_id: str) -> str:
    return task_id  # one worker per task, raised a generation per attempt


class _HeldForAPerson(Exception):
    """The task's candidate waits for a person (held_for_a_person): its thread ends here, freeing its slot."""


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
    from ..merge_queue.integration_steps import load_integration

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
    from ..merge_queue.integration_steps import load_integration

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
    from ..merge_queue.integration import queue_task

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
