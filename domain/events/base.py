"""The envelope every event shares, and the annotated field types payloads are made of.

An event is an envelope (``stream``, ``version`` within the stream,
``recorded_at``) plus its payload fields. The stored type name is
``<Name>.v<N>`` and never changes, so renaming a module cannot break replay.
Payloads hold canonical-JSON types only: no floats (durations are integer
milliseconds, times UTC ISO-8601 strings, ids strings).
"""


from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from ..kernel.names import normal_resource, valid_branch_name
from ..kernel.values import MAX_DURATION_MS, MAX_SAFE_INT, to_ms

__all__ = [
    "AbsolutePath",
    "BranchName",
    "Code",
    "Commit",
    "Event",
    "Generation",
    "Host",
    "Id",
    "Position",
    "PositiveMs",
    "RemoteName",
    "RemoteUrl",
    "RepositoryPath",
    "Resource",
    "Sha256",
    "Tail",
    "Text",
    "Timestamp",
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
RepositoryPath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^/[^\x00]*$")]
RemoteName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]  # a git remote's name
# its URL as the repository's config gave it when recorded, any password taken out; no control characters
RemoteUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048, pattern=r"^[^\x00-\x1f\x7f]+$")]
PositiveMs = Annotated[int, Field(gt=0, le=MAX_DURATION_MS)]
Generation = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
Position = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
Host = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f]+$")]  # DOCKET_HOST


class Event(BaseModel):
    """Envelope shared by every event."""

    # defer_build: each model builds its validator on first use, not at import, so a
    # command pays only for the event types it touches.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

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
        # pydantic excludes the names of any set, a frozenset too; its IncEx names set only
        return self.model_dump(exclude=self._ENVELOPE)  # type: ignore[arg-type]

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
AbsolutePath = RepositoryPath  # an absolute path on the machine that recorded it
Tail = Annotated[str, StringConstraints(max_length=4000, pattern=r"^[^\x00]*$")]  # a bounded, redacted log tail


class ProcessIdentity(BaseModel):
    """Who a process is, beyond its pid: a pid reused by another process has another start time."""

    # defer_build, as Event: the validator is built on first use, not at import.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    host: Host
    boot_id: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
    pid: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
    pgid: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
    start_time: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[0-9.]+$")]
