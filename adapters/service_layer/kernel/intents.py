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

from dataclasses import replace
from pathlib import Path
from typing import Any

from ....domain import candidate as candidate_aggregate
from ....domain.merge_queue import integration as integration_aggregate
from ....domain import run as run_aggregate
from ....domain.merge_queue import target_move
from ....domain.effects import BranchObservation, CandidateRefObservation, IntegrationObservation, decide_base_pin
from ....domain.events import (
    CandidatePinRequestedV2, IntegrationStepRequestedV2, IntegrationTargetRequestedV3, RunBasePinRequestedV2)
from ...world import faults
from .ports import CandidateRefsPort, InventoryPort, MergePort, RemotePort
from .repository_intents import (
    CANDIDATE_PIN, CANDIDATE_RELEASE, CHECK_LAUNCH, EXECUTION, EXECUTION_ON_HOST, EXECUTION_REMOVAL, HOOK,
    INTEGRATION_STEP, INTEGRATION_TARGET, INTEGRATION_TARGET_V1, IntentKind, RUN_BASE_PIN, WORKER_LAUNCH,
    WORKER_STOP, WORKTREE, WORKTREE_ON_HOST, WORKTREE_REMOVAL, _foreign, _observe_pin, _remerge)

__all__ = [
    "CANDIDATE_PIN", "CANDIDATE_PIN_ON_REMOTE", "CANDIDATE_RELEASE", "CHECK_LAUNCH", "EXECUTION",
    "EXECUTION_ON_HOST", "EXECUTION_REMOVAL", "HOOK", "INTEGRATION_STEP", "INTEGRATION_TARGET",
    "INTEGRATION_TARGET_ON_REMOTE", "INTEGRATION_TARGET_V1", "INTENT_KINDS", "RUN_BASE_PIN",
    "RUN_BASE_PIN_ON_REMOTE", "WORKER_LAUNCH", "WORKER_STOP", "WORKTREE", "WORKTREE_ON_HOST", "WORKTREE_REMOVAL",
    "IntentKind", "remote_target",
]


# --- a run with a shared git remote ([git] remote): its base read there, candidates pushed there, target moved there

def _observe_base_on_remote(ports: tuple[InventoryPort, RemotePort], intent: RunBasePinRequestedV2,
                            repository_id: str | None) -> BranchObservation:
    """The target branch on the remote, its commit fetched into the repository (tasks start from it here)."""
    inventory, remotes = ports
    repository = Path(intent.repository)
    mismatch = _foreign(inventory, repository, repository_id)
    if mismatch:
        return BranchObservation("unreadable", detail=mismatch)
    seen = remotes.observe(repository, intent.remote, intent.remote_url, f"refs/heads/{intent.target_branch}",
                           fetch=True)
    if seen.state == "found":
        return BranchObservation("found", seen.commit)
    if seen.state == "missing":
        return BranchObservation("missing", detail=f"the remote {intent.remote} ({intent.remote_url}) has no branch "
                                                   f"{intent.target_branch}")
    return BranchObservation("unreadable", detail=f"the remote {intent.remote} cannot be read: {seen.detail}")


RUN_BASE_PIN_ON_REMOTE: IntentKind[run_aggregate.Run, RunBasePinRequestedV2, BranchObservation] = IntentKind(
    intent=RunBasePinRequestedV2,
    stream_of=lambda intent: run_aggregate.stream_of(intent.run_id),
    apply=run_aggregate.apply,
    port=("inventory", "remotes"),
    observe=_observe_base_on_remote,
    decide=decide_base_pin,
    act=None,  # the remote's branch is only read (and its commit fetched): observing it is the effect
    shared=True,
)


def _observe_pin_on_remote(ports: tuple[CandidateRefsPort, RemotePort], intent: CandidatePinRequestedV2,
                           repository_id: str | None) -> CandidateRefObservation:
    """The candidate ref here and, once it names the capture's commit, the same ref on the remote."""
    candidate_refs, remotes = ports
    here = _observe_pin(candidate_refs, intent, repository_id)
    if here.state != "matching":
        return here
    return replace(here, remote=remotes.observe(Path(intent.repository), intent.remote, intent.remote_url,
                                                intent.ref))


def _pin_and_push(ports: tuple[CandidateRefsPort, RemotePort], intent: CandidatePinRequestedV2,
                  observed: CandidateRefObservation) -> None:
    """Pin here (create-only) when the ref is absent, then push the commit to the remote, create-only there too."""
    candidate_refs, remotes = ports
    if observed.state == "missing":
        assert CANDIDATE_PIN.act is not None
        CANDIDATE_PIN.act(candidate_refs, intent, observed)
        observed = _observe_pin(candidate_refs, intent, None)
        if observed.state != "matching":
            return  # the observation after the act says what is there
        faults.crash_point("pin:before-push")
    assert observed.commit is not None
    remotes.push(Path(intent.repository), intent.remote, intent.remote_url, intent.ref, observed.commit,
                 expected=None)


CANDIDATE_PIN_ON_REMOTE: IntentKind[candidate_aggregate.Candidate, CandidatePinRequestedV2,
                                    CandidateRefObservation] = IntentKind(
    intent=CandidatePinRequestedV2,
    stream_of=lambda intent: candidate_aggregate.stream_of(intent.binding_id),
    apply=candidate_aggregate.apply,
    port=("candidate_refs", "remotes"),
    observe=_observe_pin_on_remote,
    decide=candidate_aggregate.decide_pin,
    act=_pin_and_push,
    made=candidate_aggregate.made,
)


def remote_target(remotes: RemotePort, repository: Path, remote: tuple[str, str],
                  target_ref: str) -> target_move.TargetObservation:
    """The target branch on the remote as a target observation (no worktree has a remote's branch checked out), the
    commit it names fetched into the repository (merged onto, or walked for commits docket did not make)."""
    seen = remotes.observe(repository, remote[0], remote[1], target_ref, fetch=True)
    if seen.state == "found":
        return target_move.TargetObservation("found", seen.commit)
    if seen.state == "missing":
        return target_move.TargetObservation("missing", detail=f"the remote {remote[0]} has no {target_ref}")
    return target_move.TargetObservation("unreadable", detail=f"the remote {remote[0]} cannot be read: {seen.detail}")


def _observe_target_on_remote(ports: tuple[MergePort, RemotePort], intent: IntegrationTargetRequestedV3,
                              repository_id: str | None) -> target_move.TargetObservation:
    merges, remotes = ports
    repository = Path(intent.repository)
    mismatch = _foreign(merges, repository, repository_id)
    if mismatch:
        return target_move.TargetObservation("unreadable", detail=mismatch)
    return remote_target(remotes, repository, (intent.remote, intent.remote_url), intent.target_ref)


def _push_target(ports: tuple[MergePort, RemotePort], intent: IntegrationTargetRequestedV3,
                 observed: target_move.TargetObservation) -> None:
    """Compare-and-swap on the remote: the branch there moves from the expected commit to the integrated one only
    while it still names the expected one."""
    _, remotes = ports
    if observed.commit != intent.expected_commit:
        return
    remotes.push(Path(intent.repository), intent.remote, intent.remote_url, intent.target_ref, intent.commit,
                 expected=intent.expected_commit)


def _observe_integration_on_remote(ports: tuple[MergePort, RemotePort], intent: IntegrationStepRequestedV2,
                                   repository_id: str | None) -> IntegrationObservation:
    """The integration ref on the remote, relative to the step (what it names fetched here): merged once it names
    the step's merge, at-parent while it names the step's head. The remote's ref is the queue's, not this clone's:
    a machine that takes the run over finds there every merge another one made."""
    merges, remotes = ports
    repository = Path(intent.repository)
    mismatch = _foreign(merges, repository, repository_id)
    if mismatch:
        return IntegrationObservation("unreadable", detail=mismatch)
    seen = remotes.observe(repository, intent.remote, intent.remote_url, intent.integration_ref, fetch=True)
    if seen.state == "unreachable":
        return IntegrationObservation("unreadable", detail=f"the remote {intent.remote} cannot be read: {seen.detail}")
    if seen.state == "missing":
        return IntegrationObservation("missing")
    if seen.commit == intent.merge_commit:
        return IntegrationObservation("merged", commit=seen.commit)
    if seen.commit == intent.head:
        return IntegrationObservation("at-parent", commit=seen.commit)
    return IntegrationObservation("diverged", commit=seen.commit, detail=f"on the remote {intent.remote}")


def _merge_and_push(ports: tuple[MergePort, RemotePort], intent: IntegrationStepRequestedV2,
                    observed: IntegrationObservation) -> None:
    """This clone's integration ref moved to the merge first (from whatever it names: a clone that took the run
    over may have none, or an older one), then the remote's, by compare-and-swap from the step's head there."""
    merges, remotes = ports
    repository = Path(intent.repository)
    here = merges.observe_integration(repository, intent.integration_ref, intent.head, intent.candidate_commit)
    if here.state == "unreadable":
        return  # the observation after the act says what is there
    if here.commit != intent.merge_commit:
        merges.advance_ref(repository, intent.integration_ref, here.commit if here.state != "missing" else None,
                           intent.merge_commit, remerge=_remerge(intent))
        faults.crash_point("integrate:before-push")
    remotes.push(repository, intent.remote, intent.remote_url, intent.integration_ref, intent.merge_commit,
                 expected=None if observed.state == "missing" else intent.head)


INTEGRATION_STEP_ON_REMOTE: IntentKind[integration_aggregate.Integration, IntegrationStepRequestedV2,
                                       IntegrationObservation] = INTEGRATION_STEP.for_intent(
    IntegrationStepRequestedV2, _observe_integration_on_remote, port=("merges", "remotes"), act=_merge_and_push)


INTEGRATION_TARGET_ON_REMOTE: IntentKind[integration_aggregate.Integration, IntegrationTargetRequestedV3,
                                         target_move.TargetObservation] = IntentKind(
    intent=IntegrationTargetRequestedV3,
    stream_of=lambda intent: integration_aggregate.stream_of(intent.run_id),
    apply=integration_aggregate.apply,
    port=("merges", "remotes"),
    observe=_observe_target_on_remote,
    decide=target_move.decide_target,
    act=_push_target,
    made=integration_aggregate.made,
    delivers=True,
    shared=True,
)


INTENT_KINDS: dict[str, IntentKind[Any, Any, Any]] = {
    kind.type_name: kind for kind in (RUN_BASE_PIN, WORKTREE, WORKTREE_ON_HOST, WORKER_LAUNCH, WORKER_STOP, WORKTREE_REMOVAL,
                                      CANDIDATE_PIN, CANDIDATE_RELEASE, EXECUTION, EXECUTION_ON_HOST, CHECK_LAUNCH,
                                      EXECUTION_REMOVAL,
                                      INTEGRATION_STEP, INTEGRATION_TARGET, INTEGRATION_TARGET_V1, HOOK,
                                      RUN_BASE_PIN_ON_REMOTE, CANDIDATE_PIN_ON_REMOTE, INTEGRATION_STEP_ON_REMOTE,
                                      INTEGRATION_TARGET_ON_REMOTE)}
