"""A check run on a candidate: its request, its launch, its one result, and what that result means.

A check run is numbered per check name on the candidate's stream, so two runs of
one check never share an attempt (nor an execution path). Its steps, each
recorded before the next is taken: CheckRequested (bound to the configuration's
digest) and the execution intent (``execution``); the launch intent (the command
held at a gate until its identity is recorded); one result (CheckPassed,
CheckFailed or CheckTimedOut); the execution's removal intent. The state these
decide on (CheckRun) is folded with the rest of the stream in ``candidate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import events as ev
from .aggregate import next_event
from .candidate import Candidate, CheckResult, CheckRun
from .kernel.codes import Code
from .kernel.errors import Refused
from .reports.junit import Judgment, TestReport
from .run import Run, require_open
from .containment.sandbox import SandboxRecord
from .kernel.streams import candidate_stream as stream_of
from .worker import recorded_identity
from .effects import Act, Unknown

if TYPE_CHECKING:
    from .effects import Act, Unknown
    from .worker import LaunchObservation

__all__ = [
    "check_result",
    "concluded",
    "decide_check_launch",
    "interrupted",
    "lose_execution",
    "request_check",
    "request_check_launch",
    "tests_reported",
]


def request_check(candidate: Candidate, run: Run, *, check_id: str, execution_intent: str, check: str,
                  config_sha256: str, argv_sha256: str, required: bool, timeout_ms: int,
                  idle_timeout_ms: int | None, execution_for: Callable[[int], str], artifact_dir: str | None,
                  now: str, repository: str | None = None, host: str | None = None) -> list[ev.Event]:
    """The next attempt of the named check against the pinned commit, and the intent to make its execution from
    repository (the clone of the host that runs it; default: the one the candidate was pinned in), on host when
    given (ExecutionRequested.v2)."""
    require_open(run)
    if candidate.status != "pinned" or candidate.commit is None:
        raise Refused(Code.CANDIDATE_NOT_PINNED, f"candidate {candidate.binding_id} is {candidate.status}; checks run "
                                              "only on a pinned candidate")
    attempt = candidate.attempts(check) + 1
    path = execution_for(attempt)
    stream = stream_of(candidate.binding_id)
    requested = next_event(ev.CheckRequested, stream, candidate.version, now, check_id=check_id,
                           run_id=candidate.run_id, task_id=candidate.task_id, binding_id=candidate.binding_id,
                           commit=candidate.commit, check=check, attempt=attempt, config_sha256=config_sha256,
                           argv_sha256=argv_sha256, required=required, timeout_ms=timeout_ms,
                           idle_timeout_ms=idle_timeout_ms, execution=path,
                           repository=repository or candidate.repository, artifact_dir=artifact_dir)
    on_host = {} if host is None else {"host": host}
    execution = next_event(ev.ExecutionRequestedV2 if host else ev.ExecutionRequested, stream, candidate.version + 1,
                           now, intent_id=execution_intent, run_id=candidate.run_id, check_id=check_id,
                           binding_id=candidate.binding_id, repository=repository or candidate.repository, path=path,
                           commit=candidate.commit, **on_host)
    return [requested, execution]


def lose_execution(candidate: Candidate, check_id: str, *, here: str, now: str) -> list[ev.Event]:
    """The run's pending execution given up (IntentCancelled) when it is another host's to make: the docket driving
    the run, on host here, took it over from that host. The run then has no execution, and is interrupted: the
    check runs again, here. Nothing for an execution of this host, of an unknown one, or not pending."""
    run = candidate.check_run(check_id)
    if run.execution_intent is None or run.host is None or run.host == here:
        return []
    return [next_event(ev.IntentCancelled, stream_of(candidate.binding_id), candidate.version, now,
                       intent_id=run.execution_intent,
                       reason=f"the execution of check {run.check} is host {run.host}'s to make, and that host "
                              "stopped driving the run")]


def request_check_launch(candidate: Candidate, check_id: str, *, intent_id: str, log_path: str,
                         now: str, sandbox: SandboxRecord | None = None) -> ev.Event:
    run = candidate.check_run(check_id)
    if run.execution_state != "ready":
        raise Refused(Code.EXECUTION_NOT_READY, f"check {check_id}'s execution is {run.execution_state}")
    if run.launch_intent is not None or run.process is not None or run.launch_failure or run.result:
        raise Refused(Code.CHECK_LAUNCHED, f"check {check_id} was launched already; a new attempt is a new check run")
    return next_event(ev.CheckLaunchRequested, stream_of(candidate.binding_id), candidate.version, now,
                      intent_id=intent_id, run_id=candidate.run_id, check_id=check_id,
                      binding_id=candidate.binding_id, execution=run.execution, log_path=log_path,
                      sandbox=sandbox)


def decide_check_launch(candidate: Candidate, intent: ev.CheckLaunchRequested, observed: LaunchObservation,
                        now: str) -> ev.Event | Unknown | Act:

    stream = stream_of(candidate.binding_id)
    common = dict(intent_id=intent.intent_id, run_id=candidate.run_id, check_id=intent.check_id)
    if observed.state == "held":
        assert observed.identity is not None and observed.supervisor is not None
        return next_event(ev.CheckLaunched, stream, candidate.version, now, **common,
                          process=recorded_identity(observed.identity),
                          supervisor=recorded_identity(observed.supervisor))
    if observed.state == "failed":
        return next_event(ev.CheckLaunchFailed, stream, candidate.version, now, **common, code="launch-failed",
                          message=(observed.detail or "the check could not be started")[:4000])
    if observed.state == "abandoned":
        return next_event(ev.CheckLaunchFailed, stream, candidate.version, now, **common, code="launcher-gone",
                          message="the command that asked for this check ended before it started; nothing of it "
                                  "runs ('docket check run' starts a new attempt)")
    if observed.state == "other":
        return Unknown("a process of an earlier attempt to start this check is still held at its gate; it exits "
                       "by itself")
    return Act()


def check_result(candidate: Candidate, check_id: str, result: CheckResult, now: str, *, duration_ms: int | None,
                 output_sha256: str | None, output_bytes: int | None, tail: str, execution: str,
                 artifacts: Sequence[dict[str, object]] = (), code: str | None = None, exit_code: int | None = None,
                 signal: int | None = None, message: str | None = None, cause: str | None = None) -> list[ev.Event]:
    """The check run's one result; nothing when a result is recorded already."""
    run = candidate.check_run(check_id)
    if run.result is not None:
        return []
    stream = stream_of(candidate.binding_id)
    common = dict(run_id=candidate.run_id, check_id=check_id, binding_id=candidate.binding_id, check=run.check,
                  config_sha256=run.config_sha256, duration_ms=duration_ms, output_sha256=output_sha256,
                  output_bytes=output_bytes, tail=tail[-4000:], execution=execution,
                  artifacts=[ev.ArtifactRecord.model_validate(a) for a in artifacts])
    if result == "passed":
        return [next_event(ev.CheckPassed, stream, candidate.version, now, **common)]
    if result == "timed-out":
        return [next_event(ev.CheckTimedOut, stream, candidate.version, now, **common, cause=cause or "timeout",
                           timeout_ms=run.timeout_ms)]
    return [next_event(ev.CheckFailed, stream, candidate.version, now, **common, code=code or "exit",
                       exit_code=exit_code, signal=signal, message=(message or "the check failed")[:4000])]


def tests_reported(candidate: Candidate, check_id: str, now: str, *, report: str, report_sha256: str | None,
                   parsed: TestReport | None, problem: tuple[str, str] | None, judge: str,
                   base: tuple[str, str] | None = None, judgment: Judgment | None = None) -> list[ev.Event]:
    """CheckTestsReported for the run's report (parsed, or the problem (code, message) that kept it unread) and
    the judgment its result rests on (base: the base's (binding id, check id) it is relative to); nothing once the
    run has a report or a result."""
    run = candidate.check_run(check_id)
    if run.tests is not None or run.result is not None:
        return []
    failing = [ev.TestFailureRecord(id=f.id, outcome=f.outcome, message=f.message)
               for f in (parsed.failing if parsed else ())]
    return [next_event(ev.CheckTestsReported, stream_of(candidate.binding_id), candidate.version, now,
                       run_id=candidate.run_id, check_id=check_id, binding_id=candidate.binding_id, check=run.check,
                       report=report, report_sha256=report_sha256, problem=problem[0] if problem else None,
                       problem_message=problem[1][:4000] if problem else None,
                       tests=parsed.tests if parsed else 0, failing=failing, judge=judge,
                       base_binding_id=base[0] if base else None, base_check_id=base[1] if base else None,
                       new_failures=list(judgment.new) if judgment else None,
                       known_failures=list(judgment.known) if judgment else None)]


def interrupted(candidate: Candidate, check_id: str, liveness: str, now: str) -> list[ev.Event]:
    """CheckFailed ``interrupted`` for a run nobody is running any more (its process is positively gone, or never
    started; or ``lost``: it ran on a host whose hold on the run expired, and its result would never be taken);
    nothing while it may still run, or once it has a result."""
    run = candidate.check_run(check_id)
    if run.result is not None or run.execution_intent is not None or run.launch_intent is not None:
        return []
    if run.process is not None and liveness not in ("dead", "lost"):
        return []
    why = (f"it ran on host {run.process.host}, which stopped driving the run" if run.process and liveness == "lost"
           else "its process ended with no one to record how" if run.process is not None
           else f"it never started ({run.launch_failure})" if run.launch_failure
           else "its execution could not be made" if run.execution_state == "failed"
           else "the command running it ended before it started")
    return check_result(candidate, check_id, "failed", now, duration_ms=None, output_sha256=None, output_bytes=None,
                        tail="", execution="none", code="interrupted", message=f"check {run.check}: {why}")


def concluded(candidate: Candidate, check: str, config_sha256: str) -> CheckRun | None:
    """The last run of the check on this candidate under that configuration that has a result, if any. A run
    interrupted with the docket that ran it, or stopped as a speculation given up on, says nothing of the candidate:
    it does not count, and the check runs again."""
    runs = [r for r in candidate.checks if r.check == check and r.config_sha256 == config_sha256 and r.result
            and r.result_code not in (Code.INTERRUPTED, Code.SPECULATION_CANCELLED)]
    return runs[-1] if runs else None
