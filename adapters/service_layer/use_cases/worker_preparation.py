"""Use case: what a worker's launch is given: its worktree made and set up, its lease, its prompt and environment."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ....domain import lease as lease_aggregate
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import OutcomeUnknown, Refused, WorkFailed
from ....domain.events import Event, LeaseGranted
from ....domain.containment.processes import bounded_tail, scrub_environment
from ....domain.containment.sandbox import Confinement
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from ...world.clock import Clock, lease_ttl_ms, new_id
from ...world.files.logs import known_secrets
from ..kernel.ledger import Ledger
from ..kernel.liveness import holder_liveness
from .runs import load_run
from .tasks import load_task
from .worker_generations import load_worker

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort, ProcessPort, WorkspacePort

__all__ = [
    "LEASE_TTL_MS",
    "LaunchRequest",
]


# libpq's connection settings: an agent is not told where a PostgreSQL ledger is (unless env_allow names one)
LEDGER_DATABASE_VARIABLES = frozenset({"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
                                       "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGOPTIONS", "PGSSLMODE",
                                       "PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT", "PGAPPNAME"})
LEASE_TTL_MS = lease_ttl_ms(60_000)  # a worker's lease on its worktree; the supervisor renews it every third of that
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


def _task_worktree(ledger: Ledger, clock: Clock, effector: EffectorPort, task_id: str, repository: Path,
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
             request: LaunchRequest, main_checkout: Path | None, worktree: Path, *, processes: ProcessPort,
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


def _run_setup(processes: ProcessPort, argv: list[str], *, index: int, worktree: Path, env: dict[str, str],
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


def _grant(ledger: Ledger, clock: Clock, processes: ProcessPort, resource: str, worker: worker_aggregate.Worker) -> int:
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


class Placeholders(TypedDict):
    """What a launch's {placeholders} stand for (domain.config.expand), but the prompt."""

    worktree: str
    worker_dir: str
    port: int | None
    requests: str
    mcp_config: str
    docket: str


def _environment(request: LaunchRequest, values: Placeholders, worker: worker_aggregate.Worker,
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


def last_message(ledger: Ledger, stream: str, default: str = "see 'docket log'") -> str:
    """The message of the stream's latest event that has one (a failure's, a refusal's)."""
    for _, event in reversed(ledger.history(stream)):
        message = getattr(event, "message", None)
        if message:
            return message
    return default
