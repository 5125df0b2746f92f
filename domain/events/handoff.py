"""Handoff events, on the candidate's stream (``candidate:<binding id>``): a worker hands its checked candidate to
the run's integrator, and docket confirms it only when every condition holds, or rejects it naming the one that
failed."""


from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .base import Code, Commit, Event, Generation, Id, Sha256, Text

__all__ = ["CheckBinding", "HandoffConfirmed", "HandoffOffered", "HandoffRejected"]


class HandoffOffered(Event):
    """The worker generation that made the candidate offers it for integration."""

    name = "HandoffOffered"
    run_id: Id
    task_id: Id
    binding_id: Sha256
    worker_id: Id
    generation: Generation
    commit: Commit


class CheckBinding(BaseModel):
    """A required check's passing run that a handoff rests on: its configuration's digest and output's digest."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    check: Id
    check_id: Id
    config_sha256: Sha256
    output_sha256: Sha256 | None


class HandoffConfirmed(Event):
    """The handoff holds: the worker's process is gone, its lease released or fenced, the pin matches, and every
    required check passed on this binding under the current configuration (named in checks)."""

    name = "HandoffConfirmed"
    run_id: Id
    task_id: Id
    binding_id: Sha256
    worker_id: Id
    generation: Generation
    commit: Commit
    checks: Annotated[list[CheckBinding], Field(max_length=1000)]


class HandoffRejected(Event):
    """The handoff does not hold: code names the first condition that failed."""

    name = "HandoffRejected"
    run_id: Id
    task_id: Id
    binding_id: Sha256
    code: Code
    message: Text
