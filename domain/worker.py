"""The Worker aggregate: one agent process slot, with a generation, and the life of its current process.

A worker registers at generation 1. A relaunch raises the generation and fences
the old one: anything the old generation holds or asks for is refused. Each
generation runs at most one process: WorkerLaunchRequested (intent) is resolved
by WorkerLaunched (who the process is, recorded before it may run the agent) or
WorkerLaunchFailed; WorkerStopRequested by WorkerStopped; WorkerExited records
how the process ended, once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from . import events as ev
from .reports.agent_reports import AgentReport
from .aggregate import next_event
from .kernel.errors import Refused, StaleGeneration
from .containment.process_identity import ProcessIdentity as Process
from .containment.sandbox import SandboxRecord
from .run import Run, require_open
from .kernel.streams import worker_stream as stream_of
from .kernel.codes import Code
from .effects import Act, Unknown

if TYPE_CHECKING:
    from .effects import Act, Unknown

__all__ = [
    "LaunchObservation",
    "StopObservation",
    "Worker",
    "apply",
    "decide_launch",
    "STOP_CAUSES",
    "decide_stop",
    "exit_cause",
    "exited",
    "lose",
    "register",
    "relaunch",
    "request_launch",
    "request_stop",
    "process_of",
    "recorded_identity",
    "require_current",
    "stream_of",
]

# registered: this generation has no process yet; launching: its launch intent is pending;
# running: its process was launched and has not been seen to end; exited: it ended (WorkerExited);
# launch-failed: it could not be started; lost: given up, unjudged, its host gone (WorkerLost).
Status = Literal["registered", "launching", "running", "exited", "launch-failed", "lost"]
ACTIVE = frozenset({"launching", "running"})


@dataclass(frozen=True)
class Worker:
    worker_id: str
    run_id: str
    role: str
    task_id: str | None
    generation: int
    version: int
    status: str = "registered"
    launch_intent: str | None = None
    stop_intent: str | None = None
    stop_reason: str | None = None
    process: Process | None = None
    supervisor: Process | None = None
    launched_at: str | None = None
    log_path: str | None = None
    worktree: str | None = None
    exit_cause: str | None = None
    exit_code: int | None = None


def apply(worker: Worker | None, event: ev.Event, position: int) -> Worker:
    if isinstance(event, ev.WorkerRegistered):
        return Worker(event.worker_id, event.run_id, event.role, event.task_id, 1, event.version)
    assert worker is not None, f"{event.type_name()} before WorkerRegistered"
    worker = replace(worker, version=event.version)
    if isinstance(event, ev.WorkerRelaunched):
        return Worker(worker.worker_id, worker.run_id, worker.role, worker.task_id, event.generation, event.version)
    if isinstance(event, ev.WorkerLaunchRequested):
        return replace(worker, status="launching", launch_intent=event.intent_id, log_path=event.log_path,
                       worktree=event.worktree)
    if isinstance(event, ev.WorkerLaunched):
        return replace(worker, status="running", launch_intent=None, launched_at=event.recorded_at,
                       process=process_of(event.process), supervisor=process_of(event.supervisor))
    if isinstance(event, ev.WorkerLaunchFailed):
        return replace(worker, status="launch-failed", launch_intent=None, exit_cause=event.code)
    if isinstance(event, ev.WorkerStopRequested):
        return replace(worker, stop_intent=event.intent_id, stop_reason=event.reason)
    if isinstance(event, ev.WorkerStopped):
        return replace(worker, stop_intent=None)
    if isinstance(event, ev.WorkerExited):
        return replace(worker, status="exited", exit_cause=event.cause, exit_code=event.exit_code)
    if isinstance(event, ev.WorkerLost):
        return replace(worker, status="lost")
    if isinstance(event, ev.WorkerActionRefused | ev.IntentOutcomeUnknown | ev.IntentOutcomeUnknownV2
                  | ev.AgentReported | ev.EgressRefused):
        return worker
    if isinstance(event, ev.IntentCancelled):
        if event.intent_id == worker.launch_intent:
            return replace(worker, status="launch-failed", launch_intent=None, exit_cause="cancelled")
        if event.intent_id == worker.stop_intent:
            return replace(worker, stop_intent=None)
        return worker
    raise TypeError(f"Worker cannot apply {event.type_name()}")


def register(existing: Worker | None, run: Run, worker_id: str, role: str,
             task_run_id: str | None, task_id: str | None, now: str) -> ev.Event:
    if existing is not None:
        raise Refused(Code.WORKER_EXISTS, f"worker {worker_id} is already registered in run {existing.run_id}")
    require_open(run)
    if task_id is not None and task_run_id != run.run_id:
        raise Refused(Code.TASK_NOT_IN_RUN, f"task {task_id} does not belong to run {run.run_id}")
    return next_event(ev.WorkerRegistered, stream_of(worker_id), 0, now, worker_id=worker_id,
                      run_id=run.run_id, role=role, generation=1, task_id=task_id)


def relaunch(worker: Worker, run: Run, now: str) -> ev.Event:
    """Raise the generation. Refused while this generation's process may still run: stop it, or let it end."""
    require_open(run)
    if worker.status in ACTIVE:
        raise Refused(Code.WORKER_RUNNING, f"worker {worker.worker_id} generation {worker.generation} is "
                      f"{worker.status}; its process must be positively gone first ('docket worker stop')")
    return next_event(ev.WorkerRelaunched, stream_of(worker.worker_id), worker.version, now,
                      worker_id=worker.worker_id, run_id=worker.run_id,
                      generation=worker.generation + 1, fenced_generation=worker.generation)


def lose(worker: Worker, run: Run, generation: int, *, host: str, lease_expired_at: str | None,
         now: str) -> list[ev.Event]:
    """WorkerLost for the generation, running or ended unjudged on host, which stopped renewing its leases; nothing
    when it is not current, or not running or exited. Deciding that host is gone, and that the exit is unjudged, is
    the caller's."""
    require_open(run)
    if generation != worker.generation or worker.status not in ("running", "exited"):
        return []
    return [next_event(ev.WorkerLost, stream_of(worker.worker_id), worker.version, now, run_id=worker.run_id,
                       worker_id=worker.worker_id, generation=generation, host=host, status=worker.status,
                       lease_expired_at=lease_expired_at)]


def require_current(worker: Worker, generation: int) -> None:
    if generation > worker.generation:
        raise Refused(
            Code.UNKNOWN_GENERATION,
            f"worker {worker.worker_id} has no generation {generation}; its current generation is {worker.generation}",
        )
    if generation < worker.generation:
        raise StaleGeneration(
            f"worker {worker.worker_id} generation {generation} is fenced; the current generation is {worker.generation}",
        )


# how a generation ended, by the reason docket was asked to stop it
STOP_CAUSES = {"requested": "stopped", "run-stopped": "stopped", "supervisor-gone": "stopped", "fenced": "stopped",
               "timeout": "timeout",
               "idle-timeout": "idle-timeout", "budget": "budget"}


def exit_cause(worker: Worker) -> str:
    """Why the current generation's process ended, as far as the ledger knows: a stop asked for, or unknown."""
    return STOP_CAUSES.get(worker.stop_reason or "", "unknown")


def request_launch(worker: Worker, run: Run, *, intent_id: str, agent: str, argv_sha256: str, worktree: str,
                   log_path: str, port: int | None, lease_token: int, now: str,
                   sandbox: SandboxRecord | None = None) -> ev.Event:
    """The intent to start this generation's process. A generation runs at most one."""
    require_open(run)
    if run.status != "active":
        raise Refused(Code.RUN_NOT_ACTIVE, f"run {run.run_id} is {run.status}; workers launch only in an active run")
    if worker.task_id is None:
        raise Refused(Code.WORKER_WITHOUT_TASK, f"worker {worker.worker_id} has no task to work on")
    if run.remaining_ms(now) == 0:
        raise Refused(Code.BUDGET_EXHAUSTED, f"run {run.run_id} has used its whole budget")
    if worker.status != "registered":
        raise Refused(Code.GENERATION_USED, f"worker {worker.worker_id} generation {worker.generation} is "
                      f"{worker.status}; a new process needs a new generation")
    return next_event(ev.WorkerLaunchRequested, stream_of(worker.worker_id), worker.version, now,
                      intent_id=intent_id, run_id=worker.run_id, worker_id=worker.worker_id, task_id=worker.task_id,
                      generation=worker.generation, agent=agent, argv_sha256=argv_sha256, worktree=worktree,
                      log_path=log_path, port=port, lease_token=lease_token, sandbox=sandbox)


@dataclass(frozen=True)
class LaunchObservation:
    """What the process port sees of a launch intent's process.

    held: a process carrying this intent's mark is held at a gate this process
    owns (identity given). none: no live process carries the mark, and this
    process can start one. other: one does, but its gate is not ours (a launch
    that died before recording it: it will exit by itself). failed: the start
    itself failed (detail says why). abandoned: no live process carries the mark
    and nobody here can start it (the launching command is gone; replay does not
    start agents it cannot supervise).
    """

    state: Literal["held", "none", "other", "failed", "abandoned"]
    identity: Process | None = None
    supervisor: Process | None = None  # held: the process that holds the gate and will supervise
    detail: str = ""


def decide_launch(worker: Worker, intent: ev.WorkerLaunchRequested, observed: LaunchObservation,
                  now: str) -> ev.Event | Unknown | Act:

    stream = stream_of(worker.worker_id)
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, worker_id=intent.worker_id,
                  generation=intent.generation)
    if intent.generation != worker.generation:
        return next_event(ev.WorkerLaunchFailed, stream, worker.version, now, **common, code="stale-generation",
                          message=f"generation {intent.generation} was fenced before it launched")
    if observed.state == "held":
        assert observed.identity is not None and observed.supervisor is not None
        return next_event(ev.WorkerLaunched, stream, worker.version, now, **common,
                          process=recorded_identity(observed.identity),
                          supervisor=recorded_identity(observed.supervisor))
    if observed.state == "failed":
        return next_event(ev.WorkerLaunchFailed, stream, worker.version, now, **common, code="launch-failed",
                          message=(observed.detail or "the agent could not be started")[:4000])
    if observed.state == "abandoned":
        return next_event(ev.WorkerLaunchFailed, stream, worker.version, now, **common, code="launcher-gone",
                          message="the command that asked for this launch ended before the agent started; "
                                  "nothing of it runs ('docket worker launch' starts a new generation)")
    if observed.state == "other":
        return Unknown("a process of an earlier launch attempt is still held at its gate; it exits by itself")
    return Act()


def request_stop(worker: Worker, *, intent_id: str, reason: str, now: str) -> list[ev.Event]:
    """The intent to stop the current generation's process group; nothing if a stop is already pending."""
    if worker.status == "launching":  # no identity recorded yet: nothing could be stopped for sure
        raise Refused(Code.WORKER_LAUNCHING, f"worker {worker.worker_id} generation {worker.generation} is still "
                      "launching; stop it once it runs (a launch whose command died is resolved by "
                      "'docket replay --apply')")
    if worker.status not in ACTIVE:
        raise Refused(Code.WORKER_NOT_RUNNING, f"worker {worker.worker_id} generation {worker.generation} is "
                      f"{worker.status}")
    if worker.stop_intent is not None:
        return []
    process = None if worker.process is None else recorded_identity(worker.process)
    return [next_event(ev.WorkerStopRequested, stream_of(worker.worker_id), worker.version, now, intent_id=intent_id,
                       run_id=worker.run_id, worker_id=worker.worker_id, generation=worker.generation, reason=reason,
                       process=process)]


@dataclass(frozen=True)
class StopObservation:
    """The liveness of the generation's process group: alive, dead or unknown; none when it never started."""

    liveness: Literal["alive", "dead", "unknown", "none"]
    detail: str = ""


def decide_stop(worker: Worker, intent: ev.WorkerStopRequested, observed: StopObservation,
                now: str) -> ev.Event | Unknown | Act:

    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, worker_id=intent.worker_id,
                  generation=intent.generation)
    if observed.liveness in ("dead", "none") or intent.generation != worker.generation:
        return next_event(ev.WorkerStopped, stream_of(worker.worker_id), worker.version, now, **common,
                          result="observed")
    if observed.liveness == "alive":
        return Act()
    return Unknown(observed.detail or "cannot tell whether the worker's process group is gone")


def stopped(outcome: ev.Event) -> ev.Event:
    """After the act: the group was stopped now, not found gone."""
    if isinstance(outcome, ev.WorkerStopped):
        return outcome.model_copy(update={"result": "stopped"})
    return outcome


def exited(worker: Worker, generation: int, *, cause: str, exit_code: int | None, signal: int | None,
           duration_ms: int | None, log_sha256: str | None, log_bytes: int | None, tail: str,
           now: str, log_cut_bytes: int = 0) -> list[ev.Event]:
    """WorkerExited for this generation, once: nothing if it is already recorded (or the generation is not current)."""
    if generation != worker.generation or worker.status not in ACTIVE:
        return []
    return [next_event(ev.WorkerExited, stream_of(worker.worker_id), worker.version, now, run_id=worker.run_id,
                       worker_id=worker.worker_id, generation=generation, cause=cause, exit_code=exit_code,
                       signal=signal, duration_ms=duration_ms, log_sha256=log_sha256, log_bytes=log_bytes,
                       tail=tail[-4000:], log_cut_bytes=log_cut_bytes)]


def reported(worker: Worker, generation: int, agent: str, report: AgentReport, now: str,
             version: int | None = None) -> ev.Event:
    """AgentReported for the generation (appended right after its WorkerExited: ``version`` is that event's)."""
    return next_event(ev.AgentReported, stream_of(worker.worker_id), worker.version if version is None else version,
                      now, run_id=worker.run_id, worker_id=worker.worker_id, generation=generation, agent=agent,
                      format=report.format, session_id=report.session_id, input_tokens=report.input_tokens,
                      output_tokens=report.output_tokens, cost_micro_usd=report.cost_micro_usd, turns=report.turns,
                      is_error=report.is_error)


def egress_refused(worker: Worker, generation: int, refused: list[tuple[str, int, int]], total: int, now: str,
                   version: int) -> ev.Event:
    """EgressRefused for the generation (appended right after its WorkerExited: ``version`` is that event's):
    refused is (host, port, count), most refused first, at most 32 kept."""
    return next_event(ev.EgressRefused, stream_of(worker.worker_id), version, now, run_id=worker.run_id,
                      worker_id=worker.worker_id, generation=generation, total=total,
                      refused=[ev.EgressRefusal(host=h, port=p, count=c) for h, p, c in refused[:32]])


def refused(worker: Worker, generation: int, action: str, error: Refused, now: str) -> ev.Event:
    """The record of an action refused for a fenced generation or a stale token."""
    return next_event(ev.WorkerActionRefused, stream_of(worker.worker_id), worker.version, now, run_id=worker.run_id,
                      worker_id=worker.worker_id, generation=generation, action=action, code=error.code,
                      message=str(error.message)[:4000])


def recorded_identity(p: Process) -> ev.ProcessIdentity:
    """A process's identity as events record it."""
    return ev.ProcessIdentity(host=p.host, boot_id=p.boot_id, pid=p.pid, pgid=p.pgid, start_time=p.start_time)


def process_of(p: ev.ProcessIdentity) -> Process:
    """The identity an event recorded, as the domain compares it."""
    """The identity an event recorded, as the domain compares it."""
    return Process(p.host, p.boot_id, p.pid, p.pgid, p.start_time)
