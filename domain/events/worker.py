"""Events of the Worker aggregate (stream ``worker:<worker_id>``)."""


from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..kernel.values import MAX_SAFE_INT
from ..containment.sandbox import SandboxRecord
from .base import (AbsolutePath, Code, Event, Generation, Host, Id, Position, ProcessIdentity, Sha256, Tail, Text,
                   Timestamp)

__all__ = [
    "EgressRefusal",
    "EgressRefused",
    "ProcessIdentity",
    "WorkerActionRefused",
    "WorkerExited",
    "WorkerLaunchFailed",
    "WorkerLaunchRequested",
    "WorkerLaunched",
    "WorkerLost",
    "WorkerRegistered",
    "WorkerRelaunched",
    "WorkerStopRequested",
    "WorkerStopped",
]


class WorkerRegistered(Event):
    """A worker (one agent in its own worktree) joins a run at generation 1."""

    name = "WorkerRegistered"
    worker_id: Id
    run_id: Id
    role: Id
    generation: Literal[1]
    task_id: Id | None


class WorkerRelaunched(Event):
    """A worker is relaunched: its generation rises and the old one is fenced."""

    name = "WorkerRelaunched"
    worker_id: Id
    run_id: Id
    generation: Annotated[int, Field(ge=2, le=MAX_SAFE_INT)]
    fenced_generation: Generation


class WorkerLaunchRequested(Event):
    """Intent: start the worker's agent for this generation, in the task's worktree, held at a gate."""

    name = "WorkerLaunchRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    worker_id: Id
    task_id: Id
    generation: Generation
    agent: Id  # the [agents.NAME] it runs, or "command" for one given on the command line
    argv_sha256: Sha256  # the exact argv, as canonical JSON
    worktree: AbsolutePath
    log_path: AbsolutePath
    port: Annotated[int, Field(ge=1, le=65535)] | None
    lease_token: Position
    sandbox: SandboxRecord | None = None  # what the agent may touch (None: recorded before docket had a sandbox)


class WorkerLaunched(Event):
    """Outcome: the agent's process exists, held at the gate; who it is. Only then is the gate opened."""

    name = "WorkerLaunched"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    worker_id: Id
    generation: Generation
    process: ProcessIdentity
    supervisor: ProcessIdentity  # the docket process that opens the gate and supervises it


class WorkerLaunchFailed(Event):
    """Outcome: the agent could not be started (code says why); nothing of it runs."""

    name = "WorkerLaunchFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    worker_id: Id
    generation: Generation
    code: Code
    message: Text


class WorkerExited(Event):
    """The generation's process is positively gone: how it ended, and what it printed (digest and a bounded tail)."""

    name = "WorkerExited"
    run_id: Id
    worker_id: Id
    generation: Generation
    cause: Literal["exited", "stopped", "timeout", "idle-timeout", "budget", "unknown"]
    exit_code: Annotated[int, Field(ge=0, le=255)] | None
    signal: Annotated[int, Field(ge=1, le=255)] | None
    duration_ms: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] | None
    log_sha256: Sha256 | None
    log_bytes: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] | None
    tail: Tail
    # bytes of output cut from the log's middle to keep it under the agent's max_log (0: the log is whole)
    log_cut_bytes: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] = 0


class WorkerLost(Event):
    """The generation is given up unjudged: it ran (or ended, its work not yet judged) on host, which stopped
    renewing its leases until they expired (lease_expired_at; None: it held none). Its process, if one still runs
    there, and its worktree are out of reach from here; the next generation starts afresh on the host taking over."""

    name = "WorkerLost"
    run_id: Id
    worker_id: Id
    generation: Generation
    host: Host
    status: Literal["running", "exited"]
    lease_expired_at: Timestamp | None


Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]


class AgentReported(Event):
    """What the generation's agent reported about itself in its output (its JSON result, its token line): session,
    tokens, cost in millionths of a US dollar, turns, and whether it said it failed. Recorded with WorkerExited, for
    agents whose block names a report format; a field the agent did not report is null."""

    name = "AgentReported"
    run_id: Id
    worker_id: Id
    generation: Generation
    agent: Id
    format: Literal["claude-json", "codex-jsonl", "aider"]
    session_id: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")] | None
    input_tokens: Count | None
    output_tokens: Count | None
    cost_micro_usd: Count | None
    turns: Count | None
    is_error: bool | None


class EgressRefusal(BaseModel):
    """One (host, port) the generation's egress proxy refused, and how many times."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    host: Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=r"^[a-z0-9._:\[\]*?-]+$")]
    port: Annotated[int, Field(ge=1, le=65535)]
    count: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]


class EgressRefused(Event):
    """Connections the generation's egress proxy refused (a host not in its network allow-list, or one resolving to
    a loopback, link-local or private address), recorded when the generation ends, with WorkerExited. Bounded:
    refused names at most 32 (host, port) pairs, most refused first; total counts every refused connection."""

    name = "EgressRefused"
    run_id: Id
    worker_id: Id
    generation: Generation
    refused: Annotated[list[EgressRefusal], Field(min_length=1, max_length=32)]
    total: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]


class WorkerStopRequested(Event):
    """Intent: stop the generation's whole process group (SIGTERM, then SIGKILL after a grace period)."""

    name = "WorkerStopRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    worker_id: Id
    generation: Generation
    reason: Literal["requested", "timeout", "idle-timeout", "budget", "run-stopped", "supervisor-gone"]
    process: ProcessIdentity | None  # the process whose group is to stop; None: it has not launched yet


class WorkerStopped(Event):
    """Outcome: the generation's process group is positively gone (stopped now, or already gone: observed)."""

    name = "WorkerStopped"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    worker_id: Id
    generation: Generation
    result: Literal["stopped", "observed"]


class WorkerActionRefused(Event):
    """An action on a worker's behalf was refused because it carried a fenced generation or a stale token."""

    name = "WorkerActionRefused"
    run_id: Id
    worker_id: Id
    generation: Generation  # the generation the action carried
    action: Code  # e.g. lease-renew, lease-grant, lease-release
    code: Code  # stale-generation, stale-token, ...
    message: Text
