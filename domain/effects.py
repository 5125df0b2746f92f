"""Decisions for effects: given an intent and what was observed, which outcome?

Adapters observe the world and report it as one of these plain values; the
functions here choose the outcome event. Nothing here looks at the world.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import events as ev
from . import run as run_aggregate

__all__ = ["BranchObservation", "INTENT_TYPES", "decide_base_pin"]


@dataclass(frozen=True)
class BranchObservation:
    """What the repository says about a branch.

    found: the branch names commit. missing: the repository has no such branch.
    unreadable: the repository could not be read, so nothing is known.
    """

    status: Literal["found", "missing", "unreadable"]
    commit: str | None = None
    detail: str = ""


def decide_base_pin(run: run_aggregate.Run, intent: ev.RunBasePinRequested,
                    observed: BranchObservation, now: str) -> ev.Event:
    if observed.status == "found":
        return run_aggregate.record_base_pin(run, intent.intent_id, now, commit=observed.commit)
    if observed.status == "missing":
        return run_aggregate.record_base_pin(
            run, intent.intent_id, now,
            failure=("unknown-branch", f"branch {intent.target_branch!r} does not exist in {intent.repository}"),
        )
    return run_aggregate.record_unknown(run, intent.intent_id, observed.detail or "repository unreadable", now)


# Every intent type the effector drives (one decision function above for each).
INTENT_TYPES = (ev.RunBasePinRequested.type_name(),)
