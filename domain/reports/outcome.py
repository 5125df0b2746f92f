"""What a run came to, for a person: the one rule every surface words a run's outcome by.

``docket status`` (text and ``--json``), ``docket watch``, the live view, the web pages and the summary of
``docket go`` all show a run's outcome in these words, from :func:`run_outcome` alone:

- ``delivered``: the run closed and every one of its tasks reached the target (n of n, n > 0);
- ``partly delivered (n of m)``: the run closed and n of its m tasks reached the target (0 < n < m);
- ``nothing delivered``: the run closed (completed, or failed: its base could not be pinned) and none of its
  tasks reached the target (or it had none);
- ``stopped``: the run was stopped before it finished: aborted, budget-limited (its time, cost or tokens spent),
  paused, or a run ``docket go`` planned that no docket process drives any more (interrupted: resume it with
  ``docket go --resume RUN``); what it delivered until then is said beside it ("stopped (1 of 3 delivered)");
- ``waiting for you``: the run is open and something waits for a person: a question or proposal of an agent, a
  candidate awaiting approval, a change to what the run trusts held for approval, a target checkout in the way,
  ``docket go`` ended waiting (RunWaiting). This is the "needs you" marker of the runs list;
- ``running``: the run is open, something drives it (or it is a run driven by hand), nothing waits for a person.

A closed run never waits for a person (its outcome is final): ``needs_you`` is only ever true for an open run.
The JSON shape is stable: ``{"state", "words", "detail", "delivered", "tasks", "needs_you"}``, ``state`` one of
:data:`STATES` (the words with hyphens, without the counts), ``words`` the phrase above, ``detail`` what a stopped,
waiting or running run delivered so far ("1 of 3 delivered", else null), ``delivered`` and ``tasks`` the counts.
Every surface shows ``words`` followed by `` (detail)`` when there is one: ``Outcome.line``.

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CLOSED_STATUSES", "Outcome", "STATES", "STOPPED_STATUSES", "run_outcome"]

DELIVERED, PARTLY, NOTHING, STOPPED, WAITING, RUNNING = (
    "delivered", "partly-delivered", "nothing-delivered", "stopped", "waiting-for-you", "running")
STATES = (DELIVERED, PARTLY, NOTHING, STOPPED, WAITING, RUNNING)
CLOSED_STATUSES = frozenset({"completed", "aborted", "budget-limited", "failed"})
STOPPED_STATUSES = frozenset({"aborted", "budget-limited", "paused"})  # stopped by a person or a limit


@dataclass(frozen=True)
class Outcome:
    state: str  # one of STATES
    words: str  # "delivered", "partly delivered (2 of 3)", "nothing delivered", "stopped", "waiting for you", "running"
    delivered: int  # tasks whose work reached the target
    tasks: int  # the run's tasks
    needs_you: bool  # something waits for a person (the run is open)

    @property
    def detail(self) -> str | None:
        """What a stopped, waiting or running run delivered so far ("1 of 3 delivered"), when it delivered any."""
        if self.state in (STOPPED, WAITING, RUNNING) and self.delivered:
            return f"{self.delivered} of {self.tasks} delivered"
        return None

    @property
    def line(self) -> str:
        """The words with the detail: "stopped (1 of 3 delivered)", "partly delivered (2 of 3)"."""
        return self.words + (f" ({self.detail})" if self.detail else "")

    def document(self) -> dict[str, Any]:
        return {"state": self.state, "words": self.words, "detail": self.detail, "delivered": self.delivered,
                "tasks": self.tasks, "needs_you": self.needs_you}


def run_outcome(status: str, delivered: int, tasks: int, *, needs_you: bool = False, driven: bool = True) -> Outcome:
    """The outcome of a run whose status (the runs view's: opening, active, paused, completed, aborted,
    budget-limited, failed) is ``status``, of whose ``tasks`` tasks ``delivered`` reached the target; ``needs_you``:
    something of it waits for a person; ``driven``: an open run is driven (False: a run ``docket go`` planned whose
    supervisor is gone, or a summary written once ``docket go`` let go of it)."""
    delivered = max(0, min(delivered, tasks))
    closed = status in CLOSED_STATUSES
    waiting = needs_you and not closed
    if waiting:
        return Outcome(WAITING, "waiting for you", delivered, tasks, True)
    if status in STOPPED_STATUSES or (not closed and not driven):
        return Outcome(STOPPED, "stopped", delivered, tasks, False)
    if not closed:
        return Outcome(RUNNING, "running", delivered, tasks, False)
    if tasks and delivered == tasks:
        return Outcome(DELIVERED, "delivered", delivered, tasks, False)
    if delivered:
        return Outcome(PARTLY, f"partly delivered ({delivered} of {tasks})", delivered, tasks, False)
    return Outcome(NOTHING, "nothing delivered", delivered, tasks, False)
