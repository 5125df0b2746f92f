"""Named crash points: DOCKET_FAULT=<point> makes the process SIGKILL itself there.

Tests crash at each point and prove that replay converges (DESIGN.md, promise 2).
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_POINTS", "crash_point"]

CRASH_POINTS = {
    "store:before-commit": "events and digests written, transaction not yet committed",
    "run-open:after-intent": "RunOpened and its base-pin intent committed, effector not started",
    "effector:before-observe": "intent read, world not yet observed",
    "effector:after-observe": "world observed, outcome not yet recorded",
    "effector:after-outcome": "outcome committed, projections not yet caught up",
    "projection:before-commit": "projection rows written, transaction not yet committed",
}

_ARMED = os.environ.get("DOCKET_FAULT")


def crash_point(name: str) -> None:
    assert name in CRASH_POINTS, name
    if _ARMED == name:
        os.kill(os.getpid(), signal.SIGKILL)
