"""Events of a run's hooks (stream ``hooks:<run_id>``): a configured command asked for, once per event, and its end.

A hook is named by its selector in ``[hooks]`` of docket.toml (``task-finished``,
``TaskFinished.v1``, ...) and fires for one ledger position. The intent carries
everything needed to run the command again from the ledger alone (``docket
replay --apply`` finishes a pending hook): the argv (docket.toml refuses a
credential-looking argument, so none is recorded), its timeout, the variables
let through the scrub, and where its marker, stdin document and log live.
"""


from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ..kernel.values import MAX_DURATION_MS
from ..containment.sandbox import SandboxRecord
from .base import AbsolutePath, Commit, Event, Id, PositiveMs, Position, RepositoryPath, Sha256, Tail, Text

__all__ = ["HookFinished", "HookRequested"]

Argument = Annotated[str, StringConstraints(max_length=4000, pattern=r"^[^\x00]*$")]
EnvPattern = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_*?]+$")]
Bytes = Annotated[int, Field(ge=0, le=2**53 - 1)]


ExtraPath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[/~][^\x00]*$")]
Port = Annotated[int, Field(ge=1, le=65535)]


class HookRequested(Event):
    """Intent: run the command configured for hook once for the event at position, with that event on stdin."""

    name = "HookRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    hook: Id  # the selector in [hooks]: an alias (task-finished, ...) or an event type name
    position: Position  # the event the hook fires for
    event_type: Id
    argv: Annotated[list[Argument], Field(min_length=1, max_length=256)]
    timeout_ms: PositiveMs
    env_allow: Annotated[list[EnvPattern], Field(max_length=256)]
    repository: RepositoryPath  # the repository the base's copies of the files it names are read from
    ledger: AbsolutePath  # DOCKET_LEDGER, and where the event is read from
    directory: AbsolutePath  # where its started-marker, stdin document and log are made
    # Its sandbox as docket.toml asked it (the roots are the machine's: adapters/world/processes/sandbox_roots.py). Hooks asked
    # for before docket had a sandbox ran without one: "off".
    sandbox: Literal["landlock", "off"] = "off"
    read: Annotated[list[ExtraPath], Field(max_length=256)] = []
    write: Annotated[list[ExtraPath], Field(max_length=256)] = []
    network: Literal["any", "none"] | Annotated[list[Port], Field(max_length=1000)] = "any"
    # The run's base commit: the repository files the command names are run as this commit holds them
    # (adapters/world/workspaces/base_copies.py). None: asked for before docket did so; such a hook naming a file is not run.
    base: Commit | None = None


class HookFinished(Event):
    """Outcome: how the hook's command ended. It never stops the run.

    succeeded (exit 0), failed (another exit status or a signal), timed-out (its
    group stopped at timeout_ms), not-started (the command could not be
    started), or interrupted: the docket process running it died first; it is
    not run again (message says whether its command had started).
    """

    name = "HookFinished"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    hook: Id
    position: Position
    result: Literal["succeeded", "failed", "timed-out", "not-started", "interrupted"]
    exit_code: Annotated[int, Field(ge=0, le=255)] | None
    signal: Annotated[int, Field(ge=1, le=255)] | None
    duration_ms: Annotated[int, Field(ge=0, le=MAX_DURATION_MS)] | None
    output_sha256: Sha256 | None
    output_bytes: Bytes | None
    tail: Tail  # bounded and redacted
    message: Text | None
    sandbox: SandboxRecord | None = None  # what its command could touch (None: it did not start, or before sandboxes)
