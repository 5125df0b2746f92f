"""A queue that goes on, whose target was moved while it worked, goes on from the moved target (IntegrationRequeued)
rather than stopping: what moved it, and whether the queue may go on from there.

Two ``docket go`` runs on one target are the ordinary case: each moves the target by compare-and-swap, so the
second to move finds the first's merges there. Those moves are known (the other run's IntegrationCompleted and
IntegrationStepMerged events are in this ledger, ``DocketMoves``); the queue re-merges its undelivered steps onto
the moved target, re-verifies them and moves it again. A move by anyone else is recorded as ever
(IntegrationTargetMovedByOthers, cited by the receipt) and re-queued onto too when it kept the commit docket expected
(commits added on top, as the queue does when it opens on a target that left the run's base); one that dropped or
rewrote it stops the queue as before: docket never resets or forces, and it does not build on a history that lost
what the run stood on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import events as ev
from ..aggregate import next_event
from ..kernel.codes import Code
from ..kernel.errors import Refused
from .integration import Integration, stream_of
from .target_move import moved_by_others, moved_unrecorded

if TYPE_CHECKING:
    from ..effects import ForeignCommits

__all__ = ["MAX_ROUNDS", "DocketMoves", "docket_moves", "requeue"]

# Re-queues one command makes before it gives up on a target that keeps moving (the run then waits, and
# 'docket go --resume' goes on with as many again): each round re-merges and re-verifies, so a target another run
# moves after every step is followed, and one that is moved in a loop is not followed forever.
MAX_ROUNDS = 5


@dataclass(frozen=True)
class DocketMoves:
    """The target went from expected to onto by other docket runs' moves only: their run ids, and their merge
    commits on onto's first-parent line (newest first)."""

    runs: tuple[str, ...]
    commits: tuple[str, ...]


def docket_moves(line: Sequence[str], expected: str, *, completed: Mapping[str, str],
                 merged: Mapping[str, str]) -> DocketMoves | None:
    """Whether the target's first-parent line from the commit it names (line[0]) back to expected (line[-1]) was
    made by other docket runs of this ledger: line[0] is a commit another run's target move left it at
    (completed: commit -> run id, from IntegrationCompleted) and every commit between is a merge commit of another
    run's step (merged: commit -> run id, from IntegrationStepMerged). None when not: someone else moved it."""
    if len(line) < 2 or line[-1] != expected or line[0] not in completed:
        return None
    between = line[:-1]
    if any(commit not in merged and commit not in completed for commit in between):
        return None
    runs = sorted({merged.get(c) or completed[c] for c in between})
    return DocketMoves(tuple(runs), tuple(between))


def requeue(integration: Integration, *, known: DocketMoves | None, foreign: ForeignCommits | None,
            rounds: int, now: str) -> list[ev.Event]:
    """When the target move found the target moved (and that is not recorded yet): IntegrationRequeued from where
    it is now, after IntegrationTargetMovedByOthers when it was not other docket runs (known None). A move by
    someone else that did not keep the expected commit is recorded only: the queue stays stopped. Refused
    ``target-keeps-moving`` when this command re-queued MAX_ROUNDS times already (rounds): nothing is recorded,
    the next command goes on. Nothing when there is nothing to settle."""
    if not moved_unrecorded(integration) or integration.receipt_sha256 is not None:
        return []
    if not integration.rolling:  # a queue fixed when it was prepared stops, as it always did
        return moved_by_others(integration, foreign, now)
    expected, found = integration.target_expected, integration.target_found
    assert expected is not None and found is not None and integration.target_ref is not None
    keeps = known is not None or (foreign is not None and foreign.keeps_expected)
    if keeps and rounds >= MAX_ROUNDS:
        raise Refused(Code.TARGET_KEEPS_MOVING,
                      f"{integration.target_ref} was moved again while run {integration.run_id} re-queued its work "
                      f"onto it {rounds} time(s); the run waits: 'docket go --resume {integration.run_id}' goes on "
                      "from where it is then")
    made: list[ev.Event] = [] if known is not None else moved_by_others(integration, foreign, now)
    if not keeps:
        return made  # the history the run stood on was rewritten or dropped: stopped, as recorded
    # what did not reach the target: verified steps beyond it, and steps merged on top of them and not verified yet
    # (speculation and batches check while the target moves); their merges stand on the old target
    again = [s.step for s in integration.steps
             if (s.status == "verified" and not integration.delivered(s)) or s.status == "merged"]
    version = integration.version + len(made)
    made.append(next_event(
        ev.IntegrationRequeued, stream_of(integration.run_id), version, now, run_id=integration.run_id,
        round=integration.requeues + 1, target_ref=integration.target_ref, expected_commit=expected, onto=found,
        moved_by=list(known.runs) if known else [], docket_commits=list(known.commits[:1000]) if known else [],
        requeued=again, first_step=len(integration.steps) + 1))
    return made
