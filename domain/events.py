"""Every event docket records: frozen pydantic models with fixed stored names.

An event is an envelope (``stream``, ``version`` within the stream,
``recorded_at``) plus its payload fields. The stored type name is
``<Name>.v<N>`` and never changes, so renaming a module cannot break replay.
Payloads hold canonical-JSON types only: no floats (durations are integer
milliseconds, times UTC ISO-8601 strings, ids strings).

Each class declares its ``effect_role`` in the effect protocol: intents (named
``...Requested``) ask for an effect; outcomes carry the ``intent_id`` they
resolve; an "unknown" observation leaves its intent pending.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from .names import normal_resource, valid_branch_name
from .values import MAX_DURATION_MS, MAX_SAFE_INT, to_ms

__all__ = [
    "EVENT_TYPES",
    "Event",
    "IntentCancelled",
    "IntentOutcomeUnknown",
    "IntentOutcomeUnknownV2",
    "LeaseExpired",
    "LeaseGranted",
    "LeaseReleased",
    "LeaseRenewed",
    "LedgerCreated",
    "LedgerCreatedV2",
    "RunAborted",
    "RunBasePinFailed",
    "RunBasePinRequested",
    "RunBasePinned",
    "RunCompleted",
    "RunOpened",
    "RunPaused",
    "RunResumed",
    "TaskPlanned",
    "WorkerRegistered",
    "WorkerRelaunched",
    "event_class",
]

Id = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
Text = Annotated[str, StringConstraints(min_length=1, max_length=4000, pattern=r"^[^\x00]*$")]


def _recordable(timestamp: str) -> str:
    """A real time docket can record: to_ms refuses month 99 or February 30; years end at 9999."""
    if to_ms(timestamp) < 0:
        raise ValueError("is before 1970-01-01T00:00:00.000Z")
    return timestamp


Timestamp = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"), AfterValidator(_recordable)
]
Commit = Annotated[str, StringConstraints(pattern=r"^([0-9a-f]{40}|[0-9a-f]{64})$")]
Code = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,63}$")]
BranchName = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x20~^:?*\[\\]+$"),
    AfterValidator(valid_branch_name),
]
Resource = Annotated[
    str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f]+$"), AfterValidator(normal_resource)
]
PositiveMs = Annotated[int, Field(gt=0, le=MAX_DURATION_MS)]
Generation = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
Position = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]


class Event(BaseModel):
    """Envelope shared by every event."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: ClassVar[str]
    schema_version: ClassVar[int] = 1
    # What the event is to the effect protocol: a plain fact, an intent that asks for an
    # effect, the outcome that resolves an intent (same intent_id), or an uncertain
    # observation that leaves its intent pending.
    effect_role: ClassVar[Literal["fact", "intent", "outcome", "unknown"]] = "fact"

    stream: str = Field(min_length=1, max_length=600)
    version: int = Field(ge=1, le=MAX_SAFE_INT)
    recorded_at: Timestamp

    _ENVELOPE: ClassVar[frozenset[str]] = frozenset({"stream", "version", "recorded_at"})

    @classmethod
    def type_name(cls) -> str:
        return f"{cls.name}.v{cls.schema_version}"

    # The eventsourcing library knows events by these two attributes.
    @property
    def originator_id(self) -> str:
        return self.stream

    @property
    def originator_version(self) -> int:
        return self.version

    def payload(self) -> dict[str, Any]:
        return self.model_dump(exclude=self._ENVELOPE)


class LedgerCreated(Event):
    """Legacy genesis event (v1): fixes the chain algorithm and digest(0), bound to no repository."""

    name = "LedgerCreated"
    chain: str
    genesis_digest: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


RepositoryId = Annotated[str, StringConstraints(pattern=r"^repo-[0-9a-f]{32}$")]
RepositoryPath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^/[^\x00]*$")]


class LedgerCreatedV2(Event):
    """The genesis event at position 1: fixes the chain algorithm and digest(0), and binds
    the ledger to its repository (the identity docket keeps in that repository's git
    common dir, and where that was). Both are null for a ledger made outside a repository.
    """

    name = "LedgerCreated"
    schema_version = 2
    chain: str
    genesis_digest: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    repository_id: RepositoryId | None
    repository: RepositoryPath | None


class RunOpened(Event):
    """A run is opened for one goal on one target branch, with a time budget."""

    name = "RunOpened"
    run_id: Id
    goal: Text
    target_branch: BranchName
    budget_ms: PositiveMs | None


class RunBasePinRequested(Event):
    """Intent: resolve the target branch and pin its commit as the run's base."""

    name = "RunBasePinRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    target_branch: BranchName
    repository: RepositoryPath


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


class IntentOutcomeUnknown(Event):
    """Legacy (v1): outcome not known yet; the next effector pass observed again."""

    name = "IntentOutcomeUnknown"
    effect_role = "unknown"
    intent_id: Id
    reason: Text


class IntentOutcomeUnknownV2(Event):
    """The outcome is not known yet; never a failure, and nothing is redone blindly.

    Recorded when the observation changes, or when the back-off has run out and it is
    still the same: ``observations`` counts the records in a row with this reason, and
    no effector observes the intent again on its own before ``retry_at``.
    """

    name = "IntentOutcomeUnknown"
    schema_version = 2
    effect_role = "unknown"
    intent_id: Id
    reason: Text
    observations: Annotated[int, Field(ge=1, le=2**53 - 1)]
    retry_at: Timestamp


class IntentCancelled(Event):
    """Outcome: the intent will not be carried out (its run was aborted before it was)."""

    name = "IntentCancelled"
    effect_role = "outcome"
    intent_id: Id
    reason: Text


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


class TaskPlanned(Event):
    """A unit of work is planned inside a run."""

    name = "TaskPlanned"
    task_id: Id
    run_id: Id
    title: Text


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


class LeaseGranted(Event):
    """A worker generation gets a resource until expires_at.

    Its fencing token is this event's ledger position.
    """

    name = "LeaseGranted"
    resource: Resource
    run_id: Id
    worker_id: Id
    generation: Generation
    ttl_ms: PositiveMs
    expires_at: Timestamp
    supersedes_token: Position | None


class LeaseRenewed(Event):
    """The holder extends its lease."""

    name = "LeaseRenewed"
    resource: Resource
    run_id: Id
    token: Position
    expires_at: Timestamp


class LeaseReleased(Event):
    """The holder gives the resource back."""

    name = "LeaseReleased"
    resource: Resource
    run_id: Id
    token: Position


class LeaseExpired(Event):
    """The lease ran past its expiry and is recorded as ended."""

    name = "LeaseExpired"
    resource: Resource
    run_id: Id
    token: Position


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type_name(): cls
    for cls in (
        LedgerCreated,
        LedgerCreatedV2,
        RunOpened,
        RunBasePinRequested,
        RunBasePinned,
        RunBasePinFailed,
        IntentOutcomeUnknown,
        IntentOutcomeUnknownV2,
        IntentCancelled,
        RunPaused,
        RunResumed,
        RunAborted,
        RunCompleted,
        TaskPlanned,
        WorkerRegistered,
        WorkerRelaunched,
        LeaseGranted,
        LeaseRenewed,
        LeaseReleased,
        LeaseExpired,
    )
}


def event_class(type_name: str) -> type[Event]:
    try:
        return EVENT_TYPES[type_name]
    except KeyError:
        raise KeyError(f"unknown event type {type_name!r}") from None
