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
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain import lease as lease_aggregate
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.canonical import canonical_json
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DocketError, OutcomeUnknown, Refused, WorkFailed
from ....domain.events import Event, LeaseGranted
from ....domain.containment.processes import ProcessIdentity, bounded_tail, scrub_environment
from ....domain.containment.sandbox import Confinement
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from ...world import faults
from ...world.clock import Clock, new_id
from ...world.files.log_cap import DEFAULT_MAX_LOG, cap_log
from ...world.files.logs import known_secrets, log_summary
from .leases import worktree_resource
from ..kernel.ledger import Ledger
from ..kernel.liveness import holder_liveness, process_liveness
from .runs import load_run
from .tasks import load_task
from .worker_generations import load_worker

if TYPE_CHECKING:
    from ..kernel.ports import WorkspacePort

__all__ = [
    "LEASE_TTL_MS",
    "LaunchRequest",
    "Launched",
    "exit_worker",
    "launch_worker",
    "request_stop",
]

# libpq's connection settings: an agent is not told where a PostgreSQL ledger is (unless env_allow names one)
LEDGER_DATABASE_VARIABLES = frozenset({"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
                                       "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGOPTIONS", "PGSSLMODE",
                                       "PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT", "PGAPPNAME"})
LEASE_TTL_MS = 60_000  # a worker's lease on its worktree; the supervisor renews it every third of that
SETUP_TIMEOUT_SECONDS = 3600


@dataclass(frozen=True)
class LaunchRequest:
    """What to launch: the task, and the agent's command with its settings, already chosen by the caller."""

    run_id: str
    task_id: str
    worker_id: str
    agent: str  # the [agents.NAME] name, or "command"
    command: Sequence[str]  # argv templates: {prompt}, {prompt_file}, {worktree}, {worker_dir}, {port}
    prompt_mode: str = "argument"  # argument | stdin | file
    env: Mapping[str, str] = field(default_factory=dict)  # templates like command's
    env_allow: Sequence[str] = ()
    setup: Sequence[Sequence[str]] = ()
    include: Sequence[str] = ()
    ports: bool = False
    artifact_dir: str | None = None  # left out of the candidate pinned when the agent exits
    pin_on_exit: bool = True
    base: str | None = None  # the commit a new worktree starts at (default: the run's base)
    report: str | None = None  # the agent's report format (AgentReported), if its block names one
    workspace_root: Path | None = None  # [workspace] root: where a new workspace is made (None: the data folder)
    confinement: Confinement = Confinement()  # its sandbox, as docket.toml asks it (sandboxes.py)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # [candidates] max_file_size: the pin on exit refuses larger files
    inbox: Any = None  # the run's [inbox] policy (domain.requests.InboxPolicy) its requests are decided by


@dataclass
class Launched:
    """A launched worker generation, its gate open, ready to be supervised."""

    worker_id: str
    run_id: str
    task_id: str
    generation: int
    process: ProcessIdentity
    gated: Any  # the GatedProcess (its popen is this process's child)
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


def launch_worker(ledger: Ledger, clock: Clock, effector: Any, launcher: Any, request: LaunchRequest, *,
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


def _require_worktree_here(ledger: Ledger, processes: Any, request: LaunchRequest) -> None:
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


def _launch(ledger: Ledger, clock: Clock, effector: Any, launcher: Any, request: LaunchRequest,
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
    values = dict(worktree=str(worktree), worker_dir=str(generation_dir), port=port, requests=str(channel_path),
                  mcp_config=str(write_mcp_config(generation_dir, channel_path)),
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


def _launch_sandboxed(ledger: Ledger, clock: Clock, effector: Any, launcher: Any, request: LaunchRequest,
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


def _current_worker(ledger: Ledger, clock: Clock, processes: Any,
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


def _task_worktree(ledger: Ledger, clock: Clock, effector: Any, task_id: str, repository: Path,
                   base: str | None = None, *, root: Path | None = None, host: str) -> task_aggregate.Task:
    from ...world.workspaces.data_owners import record_owner
    from ...world.files.files import own_data_folder
    from ...world.files.paths import task_worktree_path

    task = load_task(ledger, task_id)
    if task.worktree is None:
        if task.worktree_intent is None:
            path = task_worktree_path(repository, task.run_id, task.task_id, root)
            own_data_folder(path.parents[1], root)  # <root>/workspaces/<key>: a planted symlink is unsafe-path
            record_owner(path.parents[1], repository)  # whose it is, for gc once the repository is gone

            def decision(now: str) -> list[Event]:
                current = load_task(ledger, task_id)
                return task_aggregate.request_worktree(current, load_run(ledger, current.run_id), new_id("worktree"),
                                                       str(repository), str(path), now, base=base, host=host)

            ledger.decide(decision, clock.now())
            task = load_task(ledger, task_id)
        if task.worktree_intent is not None:
            effector.run_pending(only={task.worktree_intent}, after=0)
            task = load_task(ledger, task_id)
    if task.worktree is None:
        if task.worktree_failure is not None:
            raise Refused(task.worktree_failure, last_message(ledger, task_aggregate.stream_of(task_id)))
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the worktree of task {task_id} is not known to be made yet; "
                                                "'docket replay --apply' observes again")
    return task


def _prepare(ledger: Ledger, clock: Clock, workspaces: WorkspacePort, task: task_aggregate.Task,
             request: LaunchRequest, main_checkout: Path | None, worktree: Path, *, processes: Any,
             repository: Path, docket_dir: Path) -> task_aggregate.Task:
    """Copy the included files and run the setup commands in the new worktree; record that they ran."""
    included = workspaces.copy_includes(main_checkout, worktree, list(request.include)) \
        if request.include and main_checkout is not None else []
    env = _setup_environment(request, worktree)
    base = load_run(ledger, request.run_id).base_commit
    failed = message = None
    for index, argv in enumerate(request.setup):
        try:
            code, cause, tail = _run_setup(processes, list(argv), index=index, worktree=worktree, env=dict(env),
                                           confinement=request.confinement, repository=repository, base=base,
                                           folder=docket_dir / "setup" / task.task_id, docket_dir=docket_dir)
        except Refused as e:
            failed, message = e.code, e.message
            break
        except (OSError, ValueError) as e:
            failed, message = "setup-failed", f"setup command {list(argv)!r} could not run: {e}"
            break
        if cause is not None:
            failed, message = "setup-failed", (f"setup command {list(argv)!r} was stopped at its timeout of "
                                               f"{SETUP_TIMEOUT_SECONDS} s: {tail}")
            break
        if code != 0:
            failed = "setup-failed"
            how = f"exited {code}" if code > 0 else f"was killed by signal {-code}"
            message = f"setup command {list(argv)!r} {how}: {tail}"
            break

    def decision(now: str) -> Event:
        return task_aggregate.prepared(load_task(ledger, task.task_id), str(worktree), len(request.setup),
                                       included, failed, message[:4000] if message else None, now)

    ledger.decide(decision, clock.now())
    if failed is not None:
        raise WorkFailed(failed, message or "a setup command failed")
    return load_task(ledger, task.task_id)


def _setup_environment(request: LaunchRequest, worktree: Path) -> dict[str, str]:
    """A setup command's environment, scrubbed as the agent's is: no credential-looking variable unless env_allow
    names it, no DOCKET_* of docket's own (its tokens, where its ledger is), no PostgreSQL settings; plus
    DOCKET_RUN, DOCKET_TASK and DOCKET_WORKTREE."""
    env, _ = scrub_environment(os.environ, request.env_allow)
    env = {k: v for k, v in env.items() if not k.startswith("DOCKET_")
           and (k not in LEDGER_DATABASE_VARIABLES or k in request.env_allow)}
    env.update(DOCKET_RUN=request.run_id, DOCKET_TASK=request.task_id, DOCKET_WORKTREE=str(worktree))
    return env


def _run_setup(processes: Any, argv: list[str], *, index: int, worktree: Path, env: dict[str, str],
               confinement: Confinement, repository: Path, base: str | None, folder: Path,
               docket_dir: Path) -> tuple[int, str | None, str]:
    """One setup command, launched as a check is (the gated spawn of processes.py: its own session, a child of
    docket's process tree, so the orphan scan of a parallel task's launch never takes it for a daemon) in the
    agent's sandbox: it writes the new workspace and its private TMPDIR only, reads what the agent reads, and the
    repository files it names are the run's base's copies (base_copies.py). (returncode, "timeout" or None, the
    redacted tail of its output.) Refused script-not-from-base, sandbox-unavailable."""
    from ...world.workspaces.base_copies import setup_command
    from ...world.files.files import own_folder
    from ...world.processes.lifecycle import LaunchSpec, wait_for_group
    from ...world.processes.sandbox_roots import sandbox_for
    from ...world.workspaces.port import agent_roots

    own_folder(docket_dir, folder)
    stem = f"{index}.{new_id('setup')}"
    if base is None:
        raise Refused(Code.SCRIPT_NOT_FROM_BASE, "the run has no pinned base commit to run its setup commands from")
    run_argv, copies = setup_command(argv, repository=repository, base=base, workspace=worktree,
                                     folder=folder / f"{stem}.base")
    git_write, git_read = agent_roots(repository, worktree)
    sandbox = sandbox_for(confinement, write=git_write, read=[*git_read, *([copies] if copies else [])],
                          temporary=folder / f"{stem}.tmp", argv=run_argv, env=env, cwd=worktree)
    log_path = folder / f"{stem}.log"
    gated = processes.spawn_gated(LaunchSpec(argv=tuple(run_argv), cwd=worktree, env=env, log_path=log_path,
                                             sandbox=sandbox))
    try:
        gated.open()
    except BrokenPipeError:
        gated.popen.wait()
        return 125, None, "its held process ended before its gate opened"
    code, cause = wait_for_group(processes, gated, timeout_ms=SETUP_TIMEOUT_SECONDS * 1000, log_path=log_path)
    return code, cause, _tail(log_path)


def _tail(log_path: Path) -> str:
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
            end = f.read()
    except OSError:
        return ""
    return bounded_tail(end, max_lines=5, max_chars=1000, secrets=known_secrets())


def _grant(ledger: Ledger, clock: Clock, processes: Any, resource: str, worker: worker_aggregate.Worker) -> int:
    """The lease on the worktree for this generation (its fencing token)."""
    stream = lease_aggregate.stream_of(resource)
    lease = ledger.get(lease_aggregate.apply, stream)
    if lease is not None and lease.status == "held" and lease.worker_id == worker.worker_id \
            and lease.generation == worker.generation and not lease.is_expired(clock.now()):
        return lease.token

    def decision(now: str) -> Event:
        current = ledger.get(lease_aggregate.apply, stream)
        holder = None
        if current is not None:
            holder = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(current.worker_id))
        liveness = holder_liveness(ledger, processes, current)  # inside the transaction: no change in between
        return lease_aggregate.grant(current, holder, load_worker(ledger, worker.worker_id), worker.generation,
                                     load_run(ledger, worker.run_id), resource, LEASE_TTL_MS, now, liveness)

    (position, event), = ledger.decide(decision, clock.now())
    assert isinstance(event, LeaseGranted)
    return position


def _prompt(docket_dir: Path, task: task_aggregate.Task, repository: Path, remote: tuple[str, str] | None,
            answers: Sequence[tuple[str, str, str]] = (), generation: int = 1) -> tuple[str, Path]:
    """The prompt of the task's next generation and the file that holds it: the task's own (checked against the
    digest the ledger holds; in a run with a shared remote, fetched from there when another host planned it, and
    pushed there when this one has it), followed by the feedback on the last failed attempt when there was one."""
    from ....domain.kernel.codes import Code
    from ....domain.kernel.errors import VerificationFailed
    from ...world.files.prompts import read_prompt, store_prompt

    if task.prompt_sha256 is None:  # planned with a title only: the title is the prompt, in a file as any prompt
        text = task.title
    else:
        try:
            path, text = read_prompt(docket_dir, task.prompt_sha256)
        except VerificationFailed as e:
            fetched = None
            if e.code == Code.PROMPT_MISSING and remote is not None:
                from ...world.git.prompt_refs import fetch_prompt

                fetched = fetch_prompt(repository, *remote, task.prompt_sha256)
            if fetched is None:
                raise
            text = fetched
            _, path = store_prompt(docket_dir, text)
        else:
            if remote is not None:
                from ...world.git.prompt_refs import publish_prompt

                publish_prompt(repository, *remote, text)  # for a host that takes the task over
    if task.feedback:
        text = task_aggregate.retry_prompt(text, task.feedback)
    if answers:
        goes_on = bool(task.answered) and task.answered[-1].generation == generation - 1
        text = task_aggregate.answered_prompt(text, list(answers), goes_on=goes_on)
    if task.feedback or answers or task.prompt_sha256 is None:
        _, path = store_prompt(docket_dir, text)  # by content: the argv naming it binds it
    return text, path


def _free_port() -> int:
    from ...world.processes.lifecycle import free_port

    return free_port()


def _environment(request: LaunchRequest, values: Mapping[str, Any], worker: worker_aggregate.Worker,
                 worktree: Path, ledger_path: Path, port: int | None, intent_id: str) -> dict[str, str]:
    from ....domain.config import expand
    from ...world.processes.host import host_id
    from ..kernel.launcher import HOST_MARK, LAUNCH_MARK

    env, _ = scrub_environment(os.environ, request.env_allow)
    env = {k: v for k, v in env.items() if not k.startswith("DOCKET_")  # nor where the shared ledger is
           and (k not in LEDGER_DATABASE_VARIABLES or k in request.env_allow)}
    env.update({name: expand(value, **values) for name, value in request.env.items()})
    from ....domain.plan import short_id

    from ...world.processes.request_channel import CHANNEL_VARIABLE

    env.update(DOCKET_RUN=request.run_id, DOCKET_TASK=request.task_id, DOCKET_TASK_ID=short_id(request.run_id,
               request.task_id), DOCKET_WORKER=request.worker_id,
               DOCKET_GENERATION=str(worker.generation), DOCKET_LEDGER=str(ledger_path),
               DOCKET_WORKTREE=str(worktree))
    env[CHANNEL_VARIABLE] = values["requests"]
    env[LAUNCH_MARK] = intent_id
    env[HOST_MARK] = host_id()
    if port is not None:
        env["DOCKET_PORT"] = str(port)
    return env


def _launch_failure(ledger: Ledger, worker: worker_aggregate.Worker) -> str:
    return last_message(ledger, worker_aggregate.stream_of(worker.worker_id))


def last_message(ledger: Ledger, stream: str, default: str = "see 'docket log'") -> str:
    """The message of the stream's latest event that has one (a failure's, a refusal's)."""
    for _, event in reversed(ledger.history(stream)):
        message = getattr(event, "message", None)
        if message:
            return message
    return default


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


def finish_stop(ledger: Ledger, clock: Clock, effector: Any, worker_id: str, intent_id: str) -> str:
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
