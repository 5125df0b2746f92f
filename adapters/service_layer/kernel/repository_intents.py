"""The intent types carried out in a run's own repository: worktrees, pins, executions, launches, merges, hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

from ....domain import candidate as candidate_aggregate
from ....domain import check as candidate_check
from ....domain import execution as candidate_execution
from ....domain import hooks as hooks_aggregate
from ....domain.merge_queue import integration as integration_aggregate
from ....domain import run as run_aggregate
from ....domain.merge_queue import target_move
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.effects import (Act, BranchObservation, CandidateRefObservation, ExecutionObservation,
                               IntegrationObservation, Unknown, WorktreeObservation, decide_base_pin)
from ....domain.events import (
    CandidatePinRequested, CandidateReleaseRequested, CheckLaunchRequested, Event, ExecutionRemovalRequested,
    ExecutionRequested, ExecutionRequestedV2, HookRequested, IntegrationStepRequested, IntegrationTargetRequested,
    IntegrationTargetRequestedV2, RunBasePinRequested, WorkerLaunchRequested, WorkerStopRequested,
    WorktreeRemovalRequested, WorktreeRequested, WorktreeRequestedV2)
from ....domain.containment.processes import ProcessIdentity
from ...world import faults
from ...world.ledger.identity import mismatch_reason
from .ports import CandidateRefsPort, InventoryPort, MergePort, RepositoryPort, WorkspacePort

if TYPE_CHECKING:
    from .ports import ProcessPort

__all__ = [
    "CANDIDATE_PIN", "CANDIDATE_RELEASE", "CHECK_LAUNCH", "EXECUTION", "EXECUTION_ON_HOST", "EXECUTION_REMOVAL",
    "HOOK", "INTEGRATION_STEP", "INTEGRATION_TARGET", "INTEGRATION_TARGET_V1", "RUN_BASE_PIN", "WORKER_LAUNCH",
    "WORKER_STOP", "WORKTREE", "WORKTREE_ON_HOST", "WORKTREE_REMOVAL", "IntentKind",
]


A = TypeVar("A")  # the aggregate the intent's stream folds into
I = TypeVar("I", bound=Event)  # the intent event
J = TypeVar("J", bound=Event)  # a later version of it
O = TypeVar("O")  # what the port observes


@dataclass(frozen=True)
class IntentKind(Generic[A, I, O]):
    """One intent type's whole protocol, from its stream to its act."""

    intent: type[I]
    stream_of: Callable[[I], str]  # the stream the intent and its outcome live on
    apply: Callable[[A | None, Event, int], A]  # the aggregate's fold
    port: str | tuple[str, ...]  # the field of Ports that observe and act are given (a tuple: those ports, in order)
    # (port, intent, the repository id the ledger is bound to) -> observation
    observe: Callable[[Any, I, str | None], O]
    # (aggregate, intent, observation, now) -> outcome event, Unknown or Act; pure
    decide: Callable[[A, I, O, str], Event | Unknown | Act]
    act: Callable[[Any, I, O], None] | None = None  # None: observing is the whole effect
    # the outcome decided after this pass acted (e.g. "created" rather than "observed")
    made: Callable[[Event], Event] | None = None
    # acts only on a ledger docket go's watch finds intact (the target's move: what a receipt vouches for)
    delivers: bool = False
    # acts on the repository as a whole (its refs and objects), not on a host's workspace: on a host that has
    # another clone of it than the one recorded, that clone (Effector.local)
    shared: bool = False

    @property
    def type_name(self) -> str:
        return self.intent.type_name()

    def for_intent(self, intent: type[J], observe: Callable[[Any, J, str | None], O],
                   **changes: Any) -> IntentKind[A, J, O]:
        """This kind for a later version of its intent (an event type of its own, with the fields stream_of, decide
        and act read), observed its own way."""
        base: IntentKind[A, Any, O] = self
        return cast("IntentKind[A, J, O]", replace(base, intent=intent, observe=observe, **changes))


def _foreign(port: RepositoryPort, repository: Path, repository_id: str | None) -> str | None:
    """Why the repository at that path is not the one the ledger is bound to (None: it is, or none is bound)."""
    return None if repository_id is None else mismatch_reason(repository, repository_id, port.identity(repository))


def _observe_base(inventory: InventoryPort, intent: RunBasePinRequested,
                  repository_id: str | None) -> BranchObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(inventory, repository, repository_id)
    if mismatch:
        return BranchObservation("unreadable", detail=mismatch)
    return inventory.observe_branch(repository, intent.target_branch)


RUN_BASE_PIN: IntentKind[run_aggregate.Run, RunBasePinRequested, BranchObservation] = IntentKind(
    intent=RunBasePinRequested,
    stream_of=lambda intent: run_aggregate.stream_of(intent.run_id),
    apply=run_aggregate.apply,
    port="inventory",
    observe=_observe_base,
    decide=decide_base_pin,
    act=None,  # the branch is only read: observing it is the effect
)


def _observe_worktree(workspaces: WorkspacePort, intent: WorktreeRequested,
                      repository_id: str | None) -> WorktreeObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(workspaces, repository, repository_id)
    if mismatch:
        return WorktreeObservation("unreadable", detail=mismatch)
    return workspaces.observe_worktree(repository, Path(intent.path), intent.branch, intent.base)


WORKTREE: IntentKind[task_aggregate.Task, WorktreeRequested, WorktreeObservation] = IntentKind(
    intent=WorktreeRequested,
    stream_of=lambda intent: task_aggregate.stream_of(intent.task_id),
    apply=task_aggregate.apply,
    port="workspaces",
    observe=_observe_worktree,
    decide=task_aggregate.decide_worktree,
    act=lambda workspaces, intent, _: workspaces.create_worktree(Path(intent.repository), Path(intent.path),
                                                                 intent.branch, intent.base),
    made=task_aggregate.created,
)


def _observe_worktree_on_host(workspaces: WorkspacePort, intent: WorktreeRequestedV2,
                              repository_id: str | None) -> WorktreeObservation:
    from ...world.processes.host import host_id

    if intent.host != host_id():  # another host's workspace: made there, or given up (WorktreeLost), never here
        return WorktreeObservation("unreadable", detail=f"the worktree is host {intent.host}'s to make")
    return _observe_worktree(workspaces, intent, repository_id)


WORKTREE_ON_HOST: IntentKind[task_aggregate.Task, WorktreeRequestedV2, WorktreeObservation] = WORKTREE.for_intent(
    WorktreeRequestedV2, _observe_worktree_on_host)
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


def _observe_stop(processes: ProcessPort, intent: WorkerStopRequested, _: str | None) -> worker_aggregate.StopObservation:
    if intent.process is None:
        return worker_aggregate.StopObservation("none")
    return worker_aggregate.StopObservation(processes.group_liveness(ProcessIdentity(**intent.process.model_dump())))


STOP_GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL to the group


def _terminate(processes: ProcessPort, intent: WorkerStopRequested) -> None:
    assert intent.process is not None  # decide_stop acts only on a stop with a process to stop
    processes.terminate_group(ProcessIdentity(**intent.process.model_dump()), grace=STOP_GRACE_SECONDS)
WORKER_STOP: IntentKind[worker_aggregate.Worker, WorkerStopRequested, worker_aggregate.StopObservation] = IntentKind(
    intent=WorkerStopRequested,
    stream_of=lambda intent: worker_aggregate.stream_of(intent.worker_id),
    apply=worker_aggregate.apply,
    port="processes",
    observe=_observe_stop,
    decide=worker_aggregate.decide_stop,
    act=lambda processes, intent, _: _terminate(processes, intent),
    made=worker_aggregate.stopped,
)


def _observe_pin(candidate_refs: CandidateRefsPort, intent: CandidatePinRequested | CandidateReleaseRequested,
                 repository_id: str | None) -> CandidateRefObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(candidate_refs, repository, repository_id)
    if mismatch:
        return CandidateRefObservation("unreadable", detail=mismatch)
    return candidate_refs.observe_candidate(repository, intent.ref, intent.parent, intent.tree)


def pin_message(intent: CandidatePinRequested | candidate_aggregate.Candidate) -> str:
    """The candidate commit's message: it names what the commit pins, so the commit alone says where it came from
    (from the pin's intent, or the candidate it made: they hold the same fields)."""
    worker = f"\nDocket-Worker: {intent.worker_id}\nDocket-Generation: {intent.generation}" if intent.worker_id else ""
    return (f"docket candidate {intent.binding_id[:12]} of task {intent.task_id}\n\n"
            f"Docket-Run: {intent.run_id}\nDocket-Task: {intent.task_id}{worker}\n"
            f"Docket-Binding: {intent.binding_id}\nDocket-Boundary: {intent.boundary}\n")


CANDIDATE_PIN: IntentKind[candidate_aggregate.Candidate, CandidatePinRequested, CandidateRefObservation] = IntentKind(
    intent=CandidatePinRequested,
    stream_of=lambda intent: candidate_aggregate.stream_of(intent.binding_id),
    apply=candidate_aggregate.apply,
    port="candidate_refs",
    observe=_observe_pin,
    decide=candidate_aggregate.decide_pin,
    act=lambda candidate_refs, intent, _: candidate_refs.pin_candidate(
        Path(intent.repository), intent.ref, intent.parent, intent.tree, pin_message(intent),
        worktree=Path(intent.worktree), base=intent.base),
    made=candidate_aggregate.made,
)
CANDIDATE_RELEASE: IntentKind[candidate_aggregate.Candidate, CandidateReleaseRequested, CandidateRefObservation] = (
    IntentKind(
        intent=CandidateReleaseRequested,
        stream_of=lambda intent: candidate_aggregate.stream_of(intent.binding_id),
        apply=candidate_aggregate.apply,
        port="candidate_refs",
        observe=_observe_pin,
        decide=candidate_aggregate.decide_release,
        act=lambda candidate_refs, intent, _: candidate_refs.release_candidate(Path(intent.repository), intent.ref,
                                                                               intent.commit),
        made=candidate_aggregate.made,
    ))


def _observe_execution(workspaces: WorkspacePort, intent: ExecutionRequested,
                       repository_id: str | None) -> ExecutionObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(workspaces, repository, repository_id)
    if mismatch:
        return ExecutionObservation("unreadable", detail=mismatch)
    return workspaces.observe_execution(repository, Path(intent.path), intent.commit)


EXECUTION: IntentKind[candidate_aggregate.Candidate, ExecutionRequested, ExecutionObservation] = IntentKind(
    intent=ExecutionRequested,
    stream_of=lambda intent: candidate_aggregate.stream_of(intent.binding_id),
    apply=candidate_aggregate.apply,
    port="workspaces",
    observe=_observe_execution,
    decide=candidate_execution.decide_execution,
    act=lambda workspaces, intent, _: workspaces.create_execution(Path(intent.repository), Path(intent.path),
                                                                  intent.commit),
    made=candidate_aggregate.made,
)


def _observe_execution_on_host(workspaces: WorkspacePort, intent: ExecutionRequestedV2,
                               repository_id: str | None) -> ExecutionObservation:
    from ...world.processes.host import host_id

    if intent.host != host_id():  # another host's data folder and clone: made there, or given up, never here
        return ExecutionObservation("unreadable", detail=f"the execution is host {intent.host}'s to make")
    return _observe_execution(workspaces, intent, repository_id)


EXECUTION_ON_HOST: IntentKind[candidate_aggregate.Candidate, ExecutionRequestedV2, ExecutionObservation] = (
    EXECUTION.for_intent(ExecutionRequestedV2, _observe_execution_on_host))
CHECK_LAUNCH: IntentKind[candidate_aggregate.Candidate, CheckLaunchRequested, worker_aggregate.LaunchObservation] = (
    IntentKind(
        intent=CheckLaunchRequested,
        stream_of=lambda intent: candidate_aggregate.stream_of(intent.binding_id),
        apply=candidate_aggregate.apply,
        port="launcher",
        observe=lambda launcher, intent, _: launcher.observe(intent),
        decide=candidate_check.decide_check_launch,
        act=lambda launcher, intent, _: launcher.start(intent),
    ))


def _observe_removal(ports: tuple[WorkspacePort, Any], intent: ExecutionRemovalRequested,
                     repository_id: str | None) -> candidate_execution.RemovalObservation:
    workspaces, processes = ports
    repository = Path(intent.repository)
    mismatch = _foreign(workspaces, repository, repository_id)
    if mismatch:
        return candidate_execution.RemovalObservation("unreadable", detail=mismatch)
    # the commit is not known here and does not matter: anything at the path is to be removed
    observed = workspaces.observe_execution(repository, Path(intent.path), "0" * 40)
    if observed.state == "unreadable":
        return candidate_execution.RemovalObservation("unreadable", detail=observed.detail)
    group: Literal["alive", "dead", "unknown", "none"] = "none" if intent.process is None else (
        processes.group_liveness(ProcessIdentity(**intent.process.model_dump())))
    gone = observed.state == "absent" and not workspaces.execution_remnants(repository, Path(intent.path))
    return candidate_execution.RemovalObservation("absent" if gone else "present", group=group)


EXECUTION_REMOVAL: IntentKind[candidate_aggregate.Candidate, ExecutionRemovalRequested,
                              candidate_execution.RemovalObservation] = IntentKind(
    intent=ExecutionRemovalRequested,
    stream_of=lambda intent: candidate_aggregate.stream_of(intent.binding_id),
    apply=candidate_aggregate.apply,
    port=("workspaces", "processes"),
    observe=_observe_removal,
    decide=candidate_execution.decide_removal,
    act=lambda ports, intent, observed: ports[0].remove_execution(Path(intent.repository), Path(intent.path),
                                                                  group_alive=observed.group not in ("dead", "none")),
    made=candidate_aggregate.made,
)


def _observe_worktree_removal(inventory: InventoryPort, intent: WorktreeRemovalRequested,
                              repository_id: str | None) -> task_aggregate.RemovalObservation:
    repository, path = Path(intent.repository), Path(intent.path)
    mismatch = _foreign(inventory, repository, repository_id)
    if mismatch:
        return task_aggregate.RemovalObservation("unreadable", detail=mismatch)
    from ...world.files.paths import root_of_workspace

    # listed under the root the workspace was made under ([workspace] root), not only the data folder
    places = [w for w in inventory.list_docket_worktrees(repository, root_of_workspace(path)) if Path(w.path) == path]
    tip = inventory.branch_tip(repository, intent.branch)
    if tip is not None and tip != intent.head:
        return task_aggregate.RemovalObservation("moved", detail=f"branch {intent.branch} names {tip}, not "
                                                                 f"{intent.head}")
    for place in places:
        if place.detail or (place.exists and not place.registered):
            return task_aggregate.RemovalObservation("moved", detail=place.detail or f"{path} is not a worktree")
        if place.head not in (None, intent.head) or place.branch not in (None, intent.branch):
            return task_aggregate.RemovalObservation(
                "moved", detail=f"the worktree at {path} is at {place.head} on {place.branch}, not {intent.head}")
    return task_aggregate.RemovalObservation("present" if places or tip is not None else "gone")


WORKTREE_REMOVAL: IntentKind[task_aggregate.Task, WorktreeRemovalRequested, task_aggregate.RemovalObservation] = (
    IntentKind(
        intent=WorktreeRemovalRequested,
        stream_of=lambda intent: task_aggregate.stream_of(intent.task_id),
        apply=task_aggregate.apply,
        port="inventory",
        observe=_observe_worktree_removal,
        decide=task_aggregate.decide_removal,
        act=lambda inventory, intent, _: inventory.remove_worktree(Path(intent.repository), Path(intent.path),
                                                                   expected_head=intent.head, branch=intent.branch),
        made=task_aggregate.removed,
    ))


def _remerge(intent: IntegrationStepRequested) -> tuple[str, str, str] | None:
    """(merged onto, candidate, message): what computes the step's merge commit again, when the intent recorded it."""
    if intent.merge != "merged" or intent.merged_onto is None or intent.merge_message is None:
        return None
    return intent.merged_onto, intent.candidate_commit, intent.merge_message


def _observe_integration(merges: MergePort, intent: IntegrationStepRequested,
                         repository_id: str | None) -> IntegrationObservation:
    repository = Path(intent.repository)
    mismatch = _foreign(merges, repository, repository_id)
    if mismatch:
        return IntegrationObservation("unreadable", detail=mismatch)
    return merges.observe_integration(repository, intent.integration_ref, intent.head, intent.candidate_commit)


INTEGRATION_STEP: IntentKind[integration_aggregate.Integration, IntegrationStepRequested, IntegrationObservation] = (
    IntentKind(
        intent=IntegrationStepRequested,
        stream_of=lambda intent: integration_aggregate.stream_of(intent.run_id),
        apply=integration_aggregate.apply,
        port="merges",
        observe=_observe_integration,
        decide=integration_aggregate.decide_step,
        # the first step creates the ref (create-only); every later one moves it from the step's head
        act=lambda merges, intent, observed: merges.advance_ref(
            Path(intent.repository), intent.integration_ref, None if observed.state == "missing" else intent.head,
            intent.merge_commit, remerge=_remerge(intent)),
        made=integration_aggregate.made,
        shared=True,
    ))


def _observe_target(merges: MergePort, intent: target_move.TargetIntent,
                    repository_id: str | None) -> target_move.TargetObservation:
    """The target branch and, while the intent's checkout has it checked out, that checkout's index and files
    against the expected commit and the integrated one."""
    repository = Path(intent.repository)
    mismatch = _foreign(merges, repository, repository_id)
    if mismatch:
        return target_move.TargetObservation("unreadable", detail=mismatch)
    observed = merges.observe_target(repository, intent.target_ref.removeprefix("refs/heads/"))
    checkout = getattr(intent, "checkout", None)
    if checkout is None or observed.state == "unreadable" or observed.checked_out != checkout:
        return observed
    return replace(observed, checkout=merges.observe_checkout(Path(checkout), intent.expected_commit, intent.commit))


def _act_target(merges: MergePort, intent: target_move.TargetIntent,
                observed: target_move.TargetObservation) -> None:
    """The steps left, each observable: the checkout's index and files moved from the expected commit's tree to the
    integrated one's (when the intent names the checkout and they are still at the expected one), then the branch
    by compare-and-swap. Or, the branch moved by someone else after the checkout was updated: the checkout moved
    back, so that it is never left between."""
    checkout = getattr(intent, "checkout", None)
    state = observed.checkout.state if observed.checkout is not None else None
    old, new = intent.expected_commit, intent.commit
    if observed.commit != old:
        if checkout is not None and state == "at-new":
            merges.update_checkout(Path(checkout), new, old)
        return
    if checkout is not None and observed.checked_out == checkout:
        if state == "at-old":
            merges.update_checkout(Path(checkout), old, new)
            # clean at new's tree? (asked as "at-old" of new against itself: old's tree may be the same)
            if merges.observe_checkout(Path(checkout), new, new).state != "at-old":
                return  # a local change or a lock was in the way: the observation after the act says so
            faults.crash_point("integrate:after-checkout-update")
        elif state != "at-new":
            return
    merges.advance_ref(Path(intent.repository), intent.target_ref, old, new)


def _target_kind(intent: type[Any]) -> IntentKind[Any, Any, Any]:
    return IntentKind(
        intent=intent,
        stream_of=lambda intent: integration_aggregate.stream_of(intent.run_id),
        apply=integration_aggregate.apply,
        port="merges",
        observe=_observe_target,
        decide=target_move.decide_target,
        act=_act_target,
        made=integration_aggregate.made,
        delivers=True,
    )


INTEGRATION_TARGET: IntentKind[integration_aggregate.Integration, IntegrationTargetRequestedV2,
                               target_move.TargetObservation] = _target_kind(IntegrationTargetRequestedV2)
# recorded before checkouts were updated: pending in an older ledger, it moves the branch only
INTEGRATION_TARGET_V1: IntentKind[integration_aggregate.Integration, IntegrationTargetRequested,
                                  target_move.TargetObservation] = _target_kind(IntegrationTargetRequested)


def _observe_hook(processes: ProcessPort, intent: HookRequested, _: str | None) -> hooks_aggregate.HookObservation:
    from ...world.hooks import observe

    return observe(processes, intent)


def _run_hook(processes: ProcessPort, intent: HookRequested, observed: hooks_aggregate.HookObservation) -> None:
    from ...world.hooks import act

    act(processes, intent, observed)


HOOK: IntentKind[hooks_aggregate.Hooks, HookRequested, hooks_aggregate.HookObservation] = IntentKind(
    intent=HookRequested,
    stream_of=lambda intent: hooks_aggregate.stream_of(intent.run_id),
    apply=hooks_aggregate.apply,
    port="processes",
    observe=_observe_hook,
    decide=hooks_aggregate.decide,
    act=_run_hook,  # claims the hook (create-only marker) and runs its command to its end; or stops an orphan
)
