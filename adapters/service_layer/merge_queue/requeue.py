"""Use case: settle a target found moved when it was to move (domain/merge_queue/requeue.py): read who moved it (other docket runs
of this ledger, from their events and the target's first-parent line; else the commits someone else brought), and
record it: IntegrationRequeued (the queue goes on from the moved target), IntegrationTargetMovedByOthers, or both."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ....domain import events as ev
from ....domain.merge_queue import integration as integration_aggregate
from ....domain.merge_queue.requeue import DocketMoves, docket_moves, requeue
from ....domain.merge_queue.target_move import moved_unrecorded
from ...world.clock import Clock
from ..kernel.ledger import Ledger

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["docket_moves_between", "settle_moved_target"]

# Commits read back along the target's first-parent line when telling other docket runs' moves from a stranger's:
# a longer line than this between two moves of this run is someone else's (recorded as such, never trusted).
MAX_LINE = 10_000


def settle_moved_target(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, *, rounds: int = 0) -> bool:
    """Record how the target found moved came to be where it is, once; True when the queue was re-queued onto it.
    rounds: the re-queues this command made already (Refused ``target-keeps-moving`` at the limit)."""
    stream = integration_aggregate.stream_of(run_id)
    integration = ledger.get(integration_aggregate.apply, stream)
    if integration is None or not moved_unrecorded(integration):
        return False
    assert integration.repository is not None and integration.target_expected and integration.target_found
    repository = effector.local(integration.repository)
    known = docket_moves_between(ledger, repository, run_id, integration.target_expected,
                                 integration.target_found) if integration.rolling else None
    foreign = None if known is not None else effector.ports.merges.foreign_commits(
        repository, integration.target_expected, integration.target_found)

    def decision(now: str) -> list[ev.Event]:
        current = ledger.get(integration_aggregate.apply, stream)
        assert current is not None
        return requeue(current, known=known, foreign=foreign, rounds=rounds, now=now)

    appended = ledger.decide(decision, clock.now())
    return any(isinstance(event, ev.IntegrationRequeued) for _, event in appended)


def docket_moves_between(ledger: Ledger, repository: Path, run_id: str, expected: str,
                         found: str) -> DocketMoves | None:
    """The other docket runs (not run_id) whose moves alone brought the target from expected to found, if so."""
    from ...world.git.history import first_parents

    completed: dict[str, str] = {}
    merged: dict[str, str] = {}
    for _, event in ledger.events_of(ev.IntegrationCompleted, ev.IntegrationStepMerged):
        if event.run_id == run_id:  # type: ignore[attr-defined]
            continue
        if isinstance(event, ev.IntegrationCompleted):
            completed[event.commit] = event.run_id
        elif isinstance(event, ev.IntegrationStepMerged):
            merged[event.merge_commit] = event.run_id
    if found not in completed:
        return None
    return docket_moves(first_parents(repository, found, expected, MAX_LINE), expected, completed=completed,
                        merged=merged)
