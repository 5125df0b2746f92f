"""Every intent type, declared once: where it lives, how it is observed, decided and carried out.

The effector dispatches on INTENT_KINDS alone. Which events are intents at all
comes from the event classes' ``effect_role`` (``domain.effects.INTENT_TYPES``);
a test holds the two to each other, one kind per intent type.

The protocol each kind follows: observe the world through its port; decide, from
the aggregate and the observation, the outcome, ``Unknown`` or ``Act`` (the world
is positively in the state before the effect); only on ``Act``, act with
compare-and-swap, observe again and decide once more. An act reports nothing
and raises nothing for a state of the world: the observation after it says
what happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ...domain import run as run_aggregate
from ...domain import task as task_aggregate
from ...domain import worker as worker_aggregate
from ...domain.effects import Act, BranchObservation, Unknown, WorktreeObservation, decide_base_pin
from ...domain.events import Event, RunBasePinRequested, WorkerLaunchRequested, WorkerStopRequested, WorktreeRequested
from ...domain.processes import ProcessIdentity
from ..world.identity import mismatch_reason
from .ports import GitPort

__all__ = ["INTENT_KINDS", "RUN_BASE_PIN", "WORKER_LAUNCH", "WORKER_STOP", "WORKTREE", "IntentKind"]

A = TypeVar("A")  # the aggregate the intent's stream folds into
I = TypeVar("I", bound=Event)  # the intent event
O = TypeVar("O")  # what the port observes


@dataclass(frozen=True)
class IntentKind(Generic[A, I, O]):
    """One intent type's whole protocol, from its stream to its act."""

    intent: type[I]
    stream_of: Callable[[I], str]  # the stream the intent and its outcome live on
    apply: Callable[[A | None, Event, int], A]  # the aggregate's fold
    port: str  # the field of Ports that observe and act are given
    # (port, intent, the repository id the ledger is bound to) -> observation
    observe: Callable[[Any, I, str | None], O]
    # (aggregate, intent, observation, now) -> outcome event, Unknown or Act; pure
    decide: Callable[[A, I, O, str], Event | Unknown | Act]
    act: Callable[[Any, I, O], None] | None = None  # None: observing is the whole effect
    # the outcome decided after this pass acted (e.g. "created" rather than "observed")
    made: Callable[[Event], Event] | None = None

    @property
    def type_name(self) -> str:
        return self.intent.type_name()


def _foreign(git: GitPort, repository: Path, repository_id: str | None) -> str | None:
    """Why the repository at that path is not the one the ledger is bound to (None: it is, or none is bound)."""
    return None if repository_id is None else mismatch_reason(repository, repository_id, git.identity(repository))


def _observe_base(git: GitPort, intent: RunBasePinRequested, repository_id: str | None) -> BranchObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(git, repository, repository_id)
    if mismatch:
        return BranchObservation("unreadable", detail=mismatch)
    return git.observe_branch(repository, intent.target_branch)


RUN_BASE_PIN: IntentKind[run_aggregate.Run, RunBasePinRequested, BranchObservation] = IntentKind(
    intent=RunBasePinRequested,
    stream_of=lambda intent: run_aggregate.stream_of(intent.run_id),
    apply=run_aggregate.apply,
    port="git",
    observe=_observe_base,
    decide=decide_base_pin,
    act=None,  # the branch is only read: observing it is the effect
)


def _observe_worktree(git: GitPort, intent: WorktreeRequested, repository_id: str | None) -> WorktreeObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(git, repository, repository_id)
    if mismatch:
        return WorktreeObservation("unreadable", detail=mismatch)
    return git.observe_worktree(repository, Path(intent.path), intent.branch, intent.base)


WORKTREE: IntentKind[task_aggregate.Task, WorktreeRequested, WorktreeObservation] = IntentKind(
    intent=WorktreeRequested,
    stream_of=lambda intent: task_aggregate.stream_of(intent.task_id),
    apply=task_aggregate.apply,
    port="git",
    observe=_observe_worktree,
    decide=task_aggregate.decide_worktree,
    act=lambda git, intent, _: git.create_worktree(Path(intent.repository), Path(intent.path), intent.branch,
                                                   intent.base),
    made=task_aggregate.created,
)

WORKER_LAUNCH: IntentKind[worker_aggregate.Worker, WorkerLaunchRequested, worker_aggregate.LaunchObservation] = (
    IntentKind(
        intent=WorkerLaunchRequested,
        stream_of=lambda intent: worker_aggregate.stream_of(intent.worker_id),
        apply=worker_aggregate.apply,
        port="launcher",
        observe=lambda launcher, intent, _: launcher.observe(intent),
        decide=worker_aggregate.decide_launch,
        act=lambda launcher, intent, _: launcher.start(intent),
    ))


def _observe_stop(processes: Any, intent: WorkerStopRequested, _: str | None) -> worker_aggregate.StopObservation:
    if intent.process is None:
        return worker_aggregate.StopObservation("none")
    return worker_aggregate.StopObservation(processes.group_liveness(ProcessIdentity(**intent.process.model_dump())))


STOP_GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL to the group

WORKER_STOP: IntentKind[worker_aggregate.Worker, WorkerStopRequested, worker_aggregate.StopObservation] = IntentKind(
    intent=WorkerStopRequested,
    stream_of=lambda intent: worker_aggregate.stream_of(intent.worker_id),
    apply=worker_aggregate.apply,
    port="processes",
    observe=_observe_stop,
    decide=worker_aggregate.decide_stop,
    act=lambda processes, intent, _: processes.terminate_group(ProcessIdentity(**intent.process.model_dump()),
                                                               grace=STOP_GRACE_SECONDS),
    made=worker_aggregate.stopped,
)

INTENT_KINDS: dict[str, IntentKind[Any, Any, Any]] = {
    kind.type_name: kind for kind in (RUN_BASE_PIN, WORKTREE, WORKER_LAUNCH, WORKER_STOP)}
