"""The record of a target moved by someone else: the commits on it docket did not make (IntegrationTargetMovedByOthers,
on the integration's stream). The Integration records it when its queue opens on a target that left the run's base
(integration.py) and when the target's move finds it moved (target_move.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .. import events as ev
from ..aggregate import next_event
from ..kernel.streams import integration_stream
from ..effects import MAX_FOREIGN_COMMITS

if TYPE_CHECKING:  # the effect machinery is imported only where an effect is observed (a plan records none)
    from ..effects import ForeignCommits

__all__ = ["moved_by_others_event"]


def moved_by_others_event(run_id: str, version: int, now: str, *, target_ref: str, expected: str, found: str,
                          seen: Literal["queue-opened", "target-moved"],
                          foreign: ForeignCommits | None) -> ev.IntegrationTargetMovedByOthers:
    """The record following version: found instead of expected, and foreign, what found brought (None: not walked,
    nothing known beyond found itself, complete False)."""

    commits = foreign.commits[:MAX_FOREIGN_COMMITS] if foreign is not None else ()
    return next_event(ev.IntegrationTargetMovedByOthers, integration_stream(run_id), version, now, run_id=run_id,
                      target_ref=target_ref, expected_commit=expected, found=found, seen=seen,
                      foreign_commits=list(commits), foreign_count=foreign.count if foreign is not None else 0,
                      complete=foreign.complete if foreign is not None else False,
                      keeps_expected=foreign.keeps_expected if foreign is not None else False)
