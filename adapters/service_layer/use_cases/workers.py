"""Use cases of workers: launch an agent for a task, stop it, record how it ended.

The path of a launch, each step recorded before the next is taken:

1. the task's worker (registered at generation 1, or relaunched at the next
   generation once its last process is positively gone);
2. the task's worktree, through its intent (WorktreeRequested), then its setup
   and included files (WorktreePrepared): each setup command launched as a check
   is, in the agent's sandbox (it writes the new workspace only), with the agent's
   scrubbed environment, the repository files it names taken from the run's base
   commit (adapters/world/workspaces/base_copies.py);
3. the lease on the worktree for this generation (reclaimed only by the rules
   of ``domain.lease.grant``);
4. the launch intent (WorkerLaunchRequested), driven by the effector: the agent
   is started held at a gate, its identity recorded (WorkerLaunched), and only
   then the gate opened. If this process dies before that, the held process
   exits by itself without running the agent.

Supervision (``supervisor.py``) takes it from there; ``reconciliation`` compares the
ledger's workers with the processes after a crash.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain import worker as worker_aggregate
from ....domain.kernel.canonical import canonical_json
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DocketError, OutcomeUnknown, Refused, WorkFailed
from ....domain.events import Event
from ....domain.containment.processes import ProcessIdentity
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from ...world import faults
from ...world.clock import Clock, new_id
from ...world.files.log_cap import DEFAULT_MAX_LOG, cap_log
from ...world.files.logs import known_secrets, log_summary
from .leases import worktree_resource
from ..kernel.ledger import Ledger
from ..kernel.liveness import process_liveness
from .runs import load_run
from .tasks import load_task
from .worker_generations import load_worker
from .worker_preparation import (
    LEASE_TTL_MS, LaunchRequest, Placeholders, _environment, _free_port, _grant, _prepare, _prompt, _task_worktree,
    last_message)

if TYPE_CHECKING:
    from ..kernel.launcher import Launcher
    from ..kernel.ports import EffectorPort, GatedHandle, ProcessPort

__all__ = [
    "LEASE_TTL_MS",
    "LaunchRequest",
    "Launched",
    "exit_worker",
    "launch_worker",
    "request_stop",
]


@dataclass
class Launched:
    """A launched worker generation, its gate open, ready to be supervised."""

    worker_id: str
    run_id: str
    task_id: str
    generation: int
    process: ProcessIdentity
    gated: GatedHandle  # the GatedProcess (its popen is this process's child)
    log_path: Path
    worktree: Path
    resource: str
    lease_token: int
    supervisions: dict[str, str] = field(default_factory=dict)  # run id -> the supervision begun for it
    artifact_dir: str | None = None
    pin_on_exit: bool = True
    agent: str | None = None
    report: str | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    channel: Any = None  # the generation's request channel (request_channel.RequestChannel), closed when it ends

    def close_channel(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.close()


def launch_worker(ledger: Ledger, clock: Clock, effector: EffectorPort, launcher: Launcher, request: LaunchRequest, *,
                  docket_dir: Path, repository: Path, main_checkout: Path | None, ledger_path: Path) -> Launched:
    """Launch the task's agent for a new generation, held at a gate until its identity is recorded; gate opened."""
    from .supervision import begin_supervision, end_supervision

    processes = launcher.processes
    _require_worktree_here(ledger, processes, request)
    worker = _current_worker(ledger, clock, processes, request)
    # supervised from here: making the worktree and starting the agent is work the run's budget pays for
    supervisions = begin_supervision(ledger, clock, processes, {request.run_id})
    try:
        return _launch(ledger, clock, effector, launcher, request, worker, supervisions, docket_dir=docket_dir,
                       repository=repository, main_checkout=main_checkout, ledger_path=ledger_path)
    except BaseException:
        end_supervision(ledger, clock, supervisions)
        raise


def _require_worktree_here(ledger: Ledger, processes: ProcessPort, request: LaunchRequest) -> None:
    """Refused (worktree-elsewhere), nothing recorded, when the task's worktree is another host's: its files (and
    any work not pinned) are on that machine, which alone launches in it (``takeover`` gives it up once that host
    stops renewing its leases)."""
    from .takeover import worktree_host

    previous = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(request.worker_id))
    host = worktree_host(load_task(ledger, request.task_id), previous)
    if host is None or host == processes.this_host()[0]:
        return
    raise Refused(Code.WORKTREE_ELSEWHERE, f"task {request.task_id}'s worktree is on host {host}; a generation is "
                                        "launched only on the host that has its worktree")


def _launch(ledger: Ledger, clock: Clock, effector: EffectorPort, launcher: Launcher, request: LaunchRequest,
            worker: worker_aggregate.Worker, supervisions: dict[str, str], *, docket_dir: Path, repository: Path,
            main_checkout: Path | None, ledger_path: Path) -> Launched:
    processes = launcher.processes
    task = _task_worktree(ledger, clock, effector, request.task_id, repository, request.base,
                          root=request.workspace_root, host=processes.this_host()[0])
    assert task.worktree is not None
    worktree = Path(task.worktree)
    if not task.prepared:
        task = _prepare(ledger, clock, effector.ports.workspaces, task, request, main_checkout, worktree,
                        processes=processes, repository=repository, docket_dir=docket_dir)

    resource = worktree_resource(request.run_id, request.task_id)
    token = _grant(ledger, clock, processes, resource, worker)

    generation_dir = docket_dir / "workers" / request.worker_id / str(worker.generation)
    log_path = docket_dir / "logs" / request.worker_id / f"{worker.generation}.log"
    from ...world.files.files import own_folder

    for folder in (generation_dir, log_path.parent):
        own_folder(docket_dir, folder)
    port = _free_port() if request.ports else None
    from .requests import earlier_answers

    prompt, prompt_file = _prompt(docket_dir, task, repository, load_run(ledger, request.run_id).remote,
                                  earlier_answers(ledger, request.worker_id, worker.generation), worker.generation)
    from ...world.processes.request_channel import SOCKET_NAME, docket_program, docket_roots, write_mcp_config

    channel_path = generation_dir / SOCKET_NAME
    values = Placeholders(worktree=str(worktree), worker_dir=str(generation_dir), port=port,
                          requests=str(channel_path), mcp_config=str(write_mcp_config(generation_dir, channel_path)),
                          docket=str(docket_program(generation_dir)))
    from ....domain.config import expand

    argv = tuple(expand(arg, **values, prompt=prompt, prompt_file=str(prompt_file) if prompt_file else None)
                 for arg in request.command)
    intent_id = new_id("launch")
    env = _environment(request, values, worker, worktree, ledger_path, port, intent_id)
    if prompt_file is not None:
        env["DOCKET_PROMPT_FILE"] = str(prompt_file)
    from ...world.workspaces.port import agent_roots
    from ...world.processes.sandbox_roots import sandbox_for

    stdin = prompt_file if request.prompt_mode == "stdin" else None
    git_write, git_read = agent_roots(repository, worktree)
    sandbox = sandbox_for(request.confinement, write=[*git_write, generation_dir],
                          read=[*git_read, *([prompt_file] if prompt_file else []), *docket_roots()],
                          temporary=generation_dir / "tmp", argv=argv, env=env, cwd=worktree,
                          egress_key=egress_key(request.worker_id, worker.generation))
    try:
        return _launch_sandboxed(ledger, clock, effector, launcher, request, worker, supervisions, sandbox,
                                 argv=argv, env=env, worktree=worktree, log_path=log_path, stdin=stdin, port=port,
                                 token=token, intent_id=intent_id, channel_path=channel_path, docket_dir=docket_dir,
                                 resource=resource)
    except BaseException:
        from ...world.processes.egress_proxy import close_proxy

        close_proxy(egress_key(request.worker_id, worker.generation))  # nothing ran through it worth recording
        raise


def egress_key(worker_id: str, generation: int) -> str:
    """The name of a worker generation's egress proxy (egress_proxy.py) in this process."""
    return f"{worker_id}/{generation}"


def _launch_sandboxed(ledger: Ledger, clock: Clock, effector: EffectorPort, launcher: Launcher, request: LaunchRequest,
                      worker: worker_aggregate.Worker, supervisions: dict[str, str], sandbox: Any, *,
                      argv: tuple[str, ...], env: dict[str, str], worktree: Path, log_path: Path, stdin: Path | None,
                      port: int | None, token: int, intent_id: str, channel_path: Path, docket_dir: Path,
                      resource: str) -> Launched:
    from ...world.processes.lifecycle import LaunchSpec

    spec = LaunchSpec(argv=argv, cwd=worktree, env=env, log_path=log_path, stdin_path=stdin, sandbox=sandbox)

    def decision(now: str) -> Event:
        current = load_worker(ledger, request.worker_id)
        return worker_aggregate.request_launch(
            current, load_run(ledger, request.run_id), intent_id=intent_id, agent=request.agent,
            argv_sha256=hashlib.sha256(canonical_json(list(argv))).hexdigest(), worktree=str(worktree),
            log_path=str(log_path), port=port, lease_token=token, now=now, sandbox=sandbox.record())

    (intent_position, _), = ledger.decide(decision, clock.now())
    launcher.expect(intent_id, spec)
    try:
        effector.run_pending(only={intent_id}, after=intent_position - 1)
        worker = load_worker(ledger, request.worker_id)
        if worker.status == "launch-failed":
            raise WorkFailed(worker.exit_cause or "launch-failed", _launch_failure(ledger, worker))
        if worker.status != "running" or worker.process is None:
            raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"worker {request.worker_id} generation {worker.generation}: "
                                                    "the launch's outcome is not known yet")
        faults.crash_point("launch:before-gate")
        channel = _open_channel(ledger, clock, request, worker, channel_path, docket_dir)  # served before it runs
        try:
            gated = launcher.release(intent_id, worker.process)
        except BaseException:
            channel.close()
            raise
    finally:
        launcher.close()
    if gated is None:
        channel.close()
        raise Refused(Code.LAUNCHED_ELSEWHERE, f"worker {request.worker_id} generation {worker.generation} was "
                                            "launched by another docket process")
    faults.crash_point("launch:after-gate")
    return Launched(request.worker_id, request.run_id, request.task_id, worker.generation, worker.process, gated,
                    log_path, worktree, resource, token, supervisions, request.artifact_dir, request.pin_on_exit,
                    request.agent, None if request.report in (None, "none") else request.report, request.max_file_size,
                    channel)


def _open_channel(ledger: Ledger, clock: Clock, request: LaunchRequest, worker: worker_aggregate.Worker,
                  path: Path, docket_dir: Path) -> Any:
    """The generation's request channel, served from here: its requests decided on a connection of its own."""
    from ....domain.requests import Binding, InboxPolicy
    from ...world.processes.request_channel import RequestChannel, descends_from
    from .requests import GenerationRequests

    assert worker.process is not None
    process = worker.process
    requests = GenerationRequests(ledger, clock, Binding(request.run_id, request.task_id, request.worker_id,
                                                         worker.generation), request.inbox or InboxPolicy(),
                                  docket_dir=docket_dir)
    return RequestChannel(path, requests, lambda pid: descends_from(pid, process.pid, process.start_time))


def _current_worker(ledger: Ledger, clock: Clock, processes: ProcessPort,
                    request: LaunchRequest) -> worker_aggregate.Worker:
    """The task's worker at a generation that has no process yet: registered, or relaunched."""
    existing = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(request.worker_id))
    if existing is not None and existing.status == "running":
        liveness = process_liveness(processes, existing)
        if liveness != "dead":
            raise Refused(Code.WORKER_RUNNING, f"worker {request.worker_id} generation {existing.generation} is "
                          f"running (its process is {liveness}); 'docket worker stop {request.worker_id}' first")
        exit_worker(ledger, clock, request.worker_id, existing.generation,
                    cause=worker_aggregate.exit_cause(existing), exit_code=None, signal=None,
                    log_path=Path(existing.log_path) if existing.log_path else None, started_at=existing.launched_at)

    def decision(now: str) -> list[Event]:
        task = load_task(ledger, request.task_id)
        run = load_run(ledger, request.run_id)
        if task.run_id != run.run_id:
            raise Refused(Code.TASK_NOT_IN_RUN, f"task {request.task_id} does not belong to run {run.run_id}")
        worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(request.worker_id))
        if worker is None:
            return [worker_aggregate.register(None, run, request.worker_id, "implementer", task.run_id,
                                              task.task_id, now)]
        if worker.task_id != task.task_id:
            raise Refused(Code.WORKER_HAS_OTHER_TASK, f"worker {worker.worker_id} works on task {worker.task_id}")
        if worker.status == "registered":
            return []
        return [worker_aggregate.relaunch(worker, run, now)]

    ledger.decide(decision, clock.now())
    return load_worker(ledger, request.worker_id)


def _launch_failure(ledger: Ledger, worker: worker_aggregate.Worker) -> str:
    return last_message(ledger, worker_aggregate.stream_of(worker.worker_id))


def request_stop(ledger: Ledger, clock: Clock, worker_id: str, reason: str,
                 generation: int | None = None) -> str | None:
    """Record the intent to stop the worker's current generation (only while it is that generation, when given:
    a supervisor stops its own generation, never the one another host relaunched); its intent id (an earlier
    pending one if any; None when the generation is not current)."""
    def decision(now: str) -> list[Event]:
        current = load_worker(ledger, worker_id)
        if generation is not None and current.generation != generation:
            return []
        return worker_aggregate.request_stop(current, intent_id=new_id("stop"), reason=reason, now=now)

    ledger.decide(decision, clock.now())
    worker = load_worker(ledger, worker_id)
    return worker.stop_intent if generation in (None, worker.generation) else None


def exit_worker(ledger: Ledger, clock: Clock, worker_id: str, generation: int, *, cause: str,
                exit_code: int | None, signal: int | None, log_path: Path | None,
                started_at: str | None, agent: str | None = None, report: str | None = None,
                max_log: int = DEFAULT_MAX_LOG) -> bool:
    """Record WorkerExited for the generation, once (False if it was already recorded); with a report format,
    AgentReported in the same transaction when the agent's output holds one, and EgressRefused when its egress
    proxy (in this process) refused connections; the proxy is closed first. The log is capped to max_log first
    (log_cap.py): what was cut is recorded with it. A report that brings the run's use to its max cost or tokens
    stops the run there (usage.py)."""
    from ....domain.reports.agent_reports import parse_report
    from ....domain.containment.processes import redact_values
    from ....domain.kernel.values import to_ms

    if log_path is not None:
        cap_log(Path(log_path), max_log)
    summary = log_summary(log_path)
    output = redact_values(summary.end.decode("utf-8", "replace"), known_secrets())  # a session id may not be one
    parsed = parse_report(report, output) if report and agent else None
    from ...world.processes.egress_proxy import close_proxy

    egress = close_proxy(egress_key(worker_id, generation))  # its proxy stops with it; None: none here

    def decision(now: str) -> list[Event]:
        duration = None if started_at is None else max(0, to_ms(now) - to_ms(started_at))
        worker = load_worker(ledger, worker_id)
        events: list[Event] = list(worker_aggregate.exited(
            worker, generation, cause=cause, exit_code=exit_code, signal=signal, duration_ms=duration,
            log_sha256=summary.sha256, log_bytes=summary.size, tail=summary.tail, now=now, log_cut_bytes=summary.cut))
        if events and parsed is not None and agent is not None:
            events.append(worker_aggregate.reported(worker, generation, agent, parsed, now, version=events[-1].version))
        if events and egress is not None and egress.total:
            events.append(worker_aggregate.egress_refused(worker, generation, egress.entries(), egress.total, now,
                                                          version=events[-1].version))
        return events

    appended = ledger.decide(decision, clock.now())
    if any(e.name == "AgentReported" for _, e in appended):
        from .usage import stop_when_spent

        try:
            stop_when_spent(ledger, clock, appended[0][1].run_id)  # type: ignore[attr-defined]
        except DocketError:
            pass  # the exit is recorded; docket go's loop or a supervisor's next check records the stop
    return bool(appended)


def finish_stop(ledger: Ledger, clock: Clock, effector: EffectorPort, worker_id: str, intent_id: str) -> str:
    """Drive a stop intent to its outcome: stopped, observed (already gone) or unknown.

    When no supervisor lives to record how the process ended, record it here.
    """
    effector.run_pending(only={intent_id}, after=0)
    worker = load_worker(ledger, worker_id)
    if worker.stop_intent == intent_id:
        return "unknown"
    outcome = next((e for _, e in reversed(ledger.history(worker_aggregate.stream_of(worker_id)))
                    if getattr(e, "intent_id", None) == intent_id and e.effect_role == "outcome"), None)
    result = getattr(outcome, "result", "cancelled")
    if worker.status in ("launching", "running"):
        supervisor = worker.supervisor
        processes = effector.ports.processes
        if supervisor is None or processes.liveness(supervisor) == "dead":
            exit_worker(ledger, clock, worker_id, worker.generation, cause="stopped", exit_code=None, signal=None,
                        log_path=Path(worker.log_path) if worker.log_path else None, started_at=worker.launched_at)
    return result
