"""A check run's execution: the detached worktree it runs in, made through its intent and removed through another.

The intent to make it (ExecutionRequested) is recorded with the check's request
(``check.request_check``); it is resolved by ExecutionCreated or ExecutionFailed.
Its removal (ExecutionRemovalRequested) waits until the check's process group is
positively gone, and is resolved by ExecutionRemoved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import events as ev
from .aggregate import next_event
from .candidate import Candidate
from .kernel.codes import Code
from .kernel.streams import candidate_stream as stream_of
from .worker import recorded_identity
from .effects import Act, Unknown

if TYPE_CHECKING:
    from .effects import Act, ExecutionObservation, Unknown

__all__ = ["RemovalObservation", "decide_execution", "decide_removal", "request_removal"]


def decide_execution(candidate: Candidate, intent: ev.ExecutionRequested, observed: ExecutionObservation,
                     now: str) -> ev.Event | Unknown | Act:

    stream = stream_of(candidate.binding_id)
    if observed.state == "absent":
        return Act()
    if observed.state == "ready":
        return next_event(ev.ExecutionCreated, stream, candidate.version, now, intent_id=intent.intent_id,
                          run_id=candidate.run_id, check_id=intent.check_id, path=intent.path, commit=intent.commit,
                          result="observed")
    if observed.state == "unsafe":  # an outcome, so the one check fails instead of every pass of the run stopping
        return next_event(ev.ExecutionFailed, stream, candidate.version, now, intent_id=intent.intent_id,
                          run_id=candidate.run_id, check_id=intent.check_id, code=Code.EXECUTION_UNSAFE_TREE,
                          message=(observed.detail or f"commit {intent.commit} cannot be checked out safely")[:4000])
    if observed.state == "diverged":
        return next_event(ev.ExecutionFailed, stream, candidate.version, now, intent_id=intent.intent_id,
                          run_id=candidate.run_id, check_id=intent.check_id, code="execution-diverged",
                          message=(observed.detail or f"something else is at {intent.path}")[:4000])
    return Unknown(observed.detail or f"cannot read the repository {intent.repository}")


@dataclass(frozen=True)
class RemovalObservation:
    """An execution before its removal: absent (nothing there), present (something is; its group is alive, dead
    or unknown), or unreadable."""

    state: Literal["absent", "present", "unreadable"]
    group: Literal["alive", "dead", "unknown", "none"] = "none"
    detail: str = ""


def request_removal(candidate: Candidate, check_id: str, *, intent_id: str, now: str) -> list[ev.Event]:
    """The intent to remove the check run's execution; nothing when it is removed or being removed."""
    run = candidate.check_run(check_id)
    if run.execution_state in ("removing", "removed") or run.execution_intent is not None:
        return []
    process = None if run.process is None else recorded_identity(run.process)
    return [next_event(ev.ExecutionRemovalRequested, stream_of(candidate.binding_id), candidate.version, now,
                       intent_id=intent_id, run_id=candidate.run_id, check_id=check_id,
                       binding_id=candidate.binding_id, repository=run.repository, path=run.execution,
                       process=process)]


def decide_removal(candidate: Candidate, intent: ev.ExecutionRemovalRequested, observed: RemovalObservation,
                   now: str) -> ev.Event | Unknown | Act:

    if observed.state == "absent":
        return next_event(ev.ExecutionRemoved, stream_of(candidate.binding_id), candidate.version, now,
                          intent_id=intent.intent_id, run_id=candidate.run_id, check_id=intent.check_id,
                          path=intent.path, result="observed")
    if observed.state == "present" and observed.group in ("dead", "none"):
        return Act()
    if observed.state == "present":
        return Unknown(f"the check's process group is {observed.group}; its execution is removed once it is gone")
    return Unknown(observed.detail or f"cannot read {intent.path}")
