"""Events of the Run aggregate (stream ``run:<run_id>``), its base-pin intent and outcomes included."""


from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..kernel.values import MAX_SAFE_INT
from .base import (AbsolutePath, BranchName, Code, Commit, Event, Id, PositiveMs, ProcessIdentity, RemoteName, RemoteUrl,
                   RepositoryPath, Sha256, Text, Timestamp)

__all__ = [
    "RunAborted",
    "RunBasePinFailed",
    "RunBasePinRequested",
    "RunBasePinRequestedV2",
    "RunBasePinned",
    "RunBudgetExhausted",
    "RunCompleted",
    "ExportKey",
    "RunOpened",
    "RunOpenedV2",
    "PlannedTask",
    "RunPaused",
    "RunPlanned",
    "RunPlannedV2",
    "RunResumed",
    "RunSupervised",
    "RunTaskAdded",
    "RunUnsupervised",
    "RunUsageExhausted",
    "RunWaiting",
]


TrustedPath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")]


class RunOpened(Event):
    """Legacy (v1): a run opened with a time budget only (see RunOpenedV2)."""

    name = "RunOpened"
    run_id: Id
    goal: Text
    target_branch: BranchName
    budget_ms: PositiveMs | None


UsageLimit = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]


class RunOpenedV2(RunOpened):
    """A run is opened for one goal on one target branch, with a time budget (active time) and limits on what its
    agents report they used (AgentReported): cost in millionths of a US dollar, tokens in and out together. The run
    stops, budget-limited, once its recorded use reaches one (RunUsageExhausted). null: no such limit."""

    schema_version = 2
    max_cost_micro_usd: UsageLimit | None
    max_tokens: UsageLimit | None


class RunBasePinRequested(Event):
    """Intent: resolve the target branch and pin its commit as the run's base."""

    name = "RunBasePinRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    target_branch: BranchName
    repository: RepositoryPath


class RunBasePinRequestedV2(RunBasePinRequested):
    """Intent: pin, as the run's base, the commit the target branch names on the shared git remote (``[git] remote``
    in docket.toml), its objects fetched into the repository. remote: its name in the repository's config; remote_url:
    its URL then, any password taken out. The run's candidates are pushed there and its target moved there."""

    schema_version = 2
    remote: RemoteName
    remote_url: RemoteUrl


class RunBasePinned(Event):
    """Outcome: the target branch's commit was observed and pinned as the base."""

    name = "RunBasePinned"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    commit: Commit
    result: Literal["observed"]


class RunBasePinFailed(Event):
    """Outcome: the base could not be pinned (for example an unknown branch)."""

    name = "RunBasePinFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    code: Code
    message: Text


class RunPaused(Event):
    """The run's active interval closes; its budget stops running."""

    name = "RunPaused"
    run_id: Id
    reason: Text | None


class RunResumed(Event):
    """A paused run becomes active again and opens a new active interval."""

    name = "RunResumed"
    run_id: Id


class RunAborted(Event):
    """The run stops for good without delivering."""

    name = "RunAborted"
    run_id: Id
    reason: Text


class RunCompleted(Event):
    """The run is finished."""

    name = "RunCompleted"
    run_id: Id


class RunSupervised(Event):
    """A docket process starts supervising work of the run: the budget's clock runs while one does."""

    name = "RunSupervised"
    run_id: Id
    supervision_id: Id
    supervisor: ProcessIdentity


class RunUnsupervised(Event):
    """A supervision ends: finished, or its process found gone (then ended_at is its last sign of life)."""

    name = "RunUnsupervised"
    run_id: Id
    supervision_id: Id
    ended_at: Timestamp
    cause: Literal["finished", "supervisor-gone"]


class RunWaiting(Event):
    """``docket go`` could not finish the run without its user, and ended: code says why (target-checked-out: the
    target's checkout has changes where the delivered tree writes; awaiting-approval), message what the user is to
    do. The run stays open; the next supervision of it (``docket go --resume``) ends the wait."""

    name = "RunWaiting"
    run_id: Id
    code: Code
    message: Text


class PlannedTask(BaseModel):
    """One task of a supervised run, and the tasks whose delivered work it starts from."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    task_id: Id
    depends_on: Annotated[list[Id], Field(max_length=1000)]


class RunPlanned(Event):
    """Legacy (v1): the plan without the key the receipt is exported with (see RunPlannedV2)."""

    name = "RunPlanned"
    run_id: Id
    tasks: Annotated[list[PlannedTask], Field(min_length=1, max_length=1000)]
    agent: Id
    cycles: Annotated[int, Field(ge=1, le=100)]
    parallel: Annotated[int, Field(ge=1, le=64)]


class RunTaskAdded(Event):
    """A task joins a planned run while it works: a follow-up task one of its workers proposed (request_key),
    accepted by the run's [inbox] proposals policy or by a person. It is planned as the run's own tasks are
    (TaskPlanned, its prompt by digest) and comes after them; it depends on the task that proposed it and on those
    the proposal named."""

    name = "RunTaskAdded"
    run_id: Id
    task: PlannedTask
    request_key: Annotated[str, StringConstraints(pattern=r"^req-[a-z2-7]{16}$")]
    proposed_by: Id  # the task that proposed it
    proposal_sha256: Sha256  # the digest of what was proposed (title, prompt, depends_on): proposed again, the same


class ExportKey(BaseModel):
    """The private key a run's receipt is exported with: its key id (the public key's securesystemslib id) and
    the absolute path of its private key file, as given when the run was planned."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    keyid: Sha256
    path: AbsolutePath


class RunPlannedV2(Event):
    """How ``docket go`` supervises the run: its tasks in order with their dependencies, the agent, the number of
    cycles (generations judged) each task may use, how many agents run at once, and the key its receipt is
    exported with (null: none). Recorded once; a resume follows it."""

    name = "RunPlanned"
    schema_version = 2
    run_id: Id
    tasks: Annotated[list[PlannedTask], Field(min_length=1, max_length=1000)]
    agent: Id
    cycles: Annotated[int, Field(ge=1, le=100)]
    parallel: Annotated[int, Field(ge=1, le=64)]
    export_key: ExportKey | None


class RunConfigurationRecorded(Event):
    """What the run trusts, recorded once when ``docket go`` plans it (domain/containment/trust.py): the digest of the docket.toml
    it read from the user's checkout (null: none, the defaults), and the repository paths a candidate may not change
    without a person's approval (docket.toml, .gitattributes, .gitmodules and every file a check, hook or
    [worktree] setup command names). A candidate changing one waits for ``docket approve``, whatever its checks
    say; the receipt names this event."""

    name = "RunConfigurationRecorded"
    run_id: Id
    config_sha256: Sha256 | None
    trusted_paths: Annotated[list[TrustedPath], Field(max_length=1000)]


class RunBudgetExhausted(Event):
    """The run has used its whole time budget: it ends budget-limited, and its workers are stopped."""

    name = "RunBudgetExhausted"
    run_id: Id
    budget_ms: PositiveMs
    used_ms: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]


class RunUsageExhausted(Event):
    """What the run's agents reported they used has reached one of its limits (limit: which; max: the limit; used:
    the run's use then, each generation counted once): it ends budget-limited, and its workers are stopped."""

    name = "RunUsageExhausted"
    run_id: Id
    limit: Literal["cost", "tokens"]
    max: UsageLimit
    used: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
