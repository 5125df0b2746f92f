"""The Run aggregate: one goal on one target branch, from a pinned base commit.

Statuses: opening (base pin pending) -> active <-> paused -> completed;
opening/active/paused -> aborted; opening -> failed (base could not be pinned).
The budget is the sum of the run's active intervals (domain.budget): pausing
closes the open interval, so time spent paused is not billed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import budget
from . import events as ev
from .aggregate import next_event
from .errors import BadInput, Refused
from .names import check_branch_name
from .streams import run_stream as stream_of
from .values import format_duration

__all__ = [
    "Run",
    "abort",
    "apply",
    "complete",
    "open_run",
    "pause",
    "record_base_pin",
    "require_open",
    "resume",
    "stream_of",
]

OPEN_STATUSES = frozenset({"opening", "active", "paused"})


@dataclass(frozen=True)
class Run:
    run_id: str
    version: int
    goal: str
    target_branch: str
    budget_ms: int | None
    status: str
    opened_at: str
    base_commit: str | None = None
    failure_code: str | None = None
    failure_message: str | None = None
    closed_ms: int = 0  # budget spent in closed active intervals
    active_since: str | None = None  # start of the open active interval, if the clock runs
    pending_intents: frozenset[str] = frozenset()

    def used_ms(self, now: str) -> int:
        """Milliseconds of budget spent: closed intervals, and the open one up to now."""
        return budget.used_ms(self.closed_ms, self.active_since, now)

    def remaining_ms(self, now: str) -> int | None:
        return budget.remaining_ms(self.budget_ms, self.used_ms(now))


def apply(run: Run | None, event: ev.Event, position: int) -> Run:
    if isinstance(event, ev.RunOpened):
        return Run(
            run_id=event.run_id,
            version=event.version,
            goal=event.goal,
            target_branch=event.target_branch,
            budget_ms=event.budget_ms,
            status="opening",
            opened_at=event.recorded_at,
            active_since=event.recorded_at,
        )
    assert run is not None, f"{event.type_name()} before RunOpened"
    run = replace(run, version=event.version)
    if isinstance(event, ev.RunBasePinRequested):
        return replace(run, pending_intents=run.pending_intents | {event.intent_id})
    if isinstance(event, ev.RunBasePinned):
        return replace(
            run,
            base_commit=event.commit,
            status="active" if run.status == "opening" else run.status,
            pending_intents=run.pending_intents - {event.intent_id},
        )
    if isinstance(event, ev.RunBasePinFailed):
        return replace(
            _close_interval(run, event.recorded_at),
            status="failed",
            failure_code=event.code,
            failure_message=event.message,
            pending_intents=run.pending_intents - {event.intent_id},
        )
    if isinstance(event, (ev.IntentOutcomeUnknown, ev.IntentOutcomeUnknownV2)):
        return run
    if isinstance(event, ev.IntentCancelled):
        return replace(run, pending_intents=run.pending_intents - {event.intent_id})
    if isinstance(event, ev.RunPaused):
        return replace(_close_interval(run, event.recorded_at), status="paused")
    if isinstance(event, ev.RunResumed):
        return replace(_close_interval(run, event.recorded_at), status="active", active_since=event.recorded_at)
    if isinstance(event, ev.RunAborted):
        return replace(_close_interval(run, event.recorded_at), status="aborted")
    if isinstance(event, ev.RunCompleted):
        return replace(_close_interval(run, event.recorded_at), status="completed")
    raise TypeError(f"Run cannot apply {event.type_name()}")


def _close_interval(run: Run, at: str) -> Run:
    return replace(run, closed_ms=run.used_ms(at), active_since=None)


def open_run(
    run_id: str, intent_id: str, goal: str, target_branch: str, budget_ms: int | None,
    repository: str, now: str,
) -> list[ev.Event]:
    """RunOpened and the intent to pin the target branch's commit as the base."""
    check_branch_name(target_branch)
    if not goal.strip():
        raise BadInput("empty-goal", "a run needs a goal")
    stream = stream_of(run_id)
    opened = next_event(
        ev.RunOpened, stream, 0, now, run_id=run_id, goal=goal, target_branch=target_branch, budget_ms=budget_ms
    )
    pin = next_event(
        ev.RunBasePinRequested, stream, 1, now, intent_id=intent_id, run_id=run_id, target_branch=target_branch,
        repository=repository,
    )
    return [opened, pin]


def record_base_pin(run: Run, intent_id: str, now: str, *, commit: str | None = None,
                    failure: tuple[str, str] | None = None) -> ev.Event:
    """The outcome of the base-pin intent: pinned at commit, or failed with (code, message).

    Whether the intent still waits for it is checked in one place, by the effector
    (``domain.effects.is_resolved``), inside the transaction that appends it.
    """
    stream = stream_of(run.run_id)
    if failure is not None:
        code, message = failure
        return next_event(ev.RunBasePinFailed, stream, run.version, now,
                          intent_id=intent_id, run_id=run.run_id, code=code, message=message)
    assert commit is not None
    return next_event(ev.RunBasePinned, stream, run.version, now,
                      intent_id=intent_id, run_id=run.run_id, commit=commit, result="observed")


def pause(run: Run, reason: str | None, now: str) -> ev.Event:
    if run.status != "active":
        raise Refused("run-not-active", f"run {run.run_id} is {run.status}; only an active run can be paused")
    return next_event(ev.RunPaused, stream_of(run.run_id), run.version, now, run_id=run.run_id, reason=reason)


def resume(run: Run, now: str) -> ev.Event:
    if run.status != "paused":
        raise Refused("run-not-paused", f"run {run.run_id} is {run.status}; only a paused run can be resumed")
    remaining = run.remaining_ms(now)
    if remaining == 0:
        raise Refused(
            "budget-exhausted",
            f"run {run.run_id} has used its whole budget of {format_duration(run.budget_ms or 0)}",
        )
    return next_event(ev.RunResumed, stream_of(run.run_id), run.version, now, run_id=run.run_id)


def abort(run: Run, reason: str, now: str) -> list[ev.Event]:
    """RunAborted, and a recorded cancellation for each of the run's intents still pending."""
    if run.status not in OPEN_STATUSES:
        raise Refused("run-closed", f"run {run.run_id} is already {run.status}")
    stream = stream_of(run.run_id)
    events: list[ev.Event] = [
        next_event(ev.RunAborted, stream, run.version, now, run_id=run.run_id, reason=reason)]
    for intent_id in sorted(run.pending_intents):
        events.append(next_event(ev.IntentCancelled, stream, events[-1].version, now, intent_id=intent_id,
                                 reason=f"run {run.run_id} was aborted"))
    return events


def complete(run: Run, now: str) -> ev.Event:
    if run.status not in ("active", "paused"):
        if run.status == "opening":
            raise Refused("run-base-not-pinned", f"run {run.run_id} has no pinned base commit yet")
        raise Refused("run-closed", f"run {run.run_id} is already {run.status}")
    return next_event(ev.RunCompleted, stream_of(run.run_id), run.version, now, run_id=run.run_id)


def require_open(run: Run) -> None:
    """Work can only be planned or leased inside a run that is still open."""
    if run.status not in OPEN_STATUSES:
        raise Refused("run-closed", f"run {run.run_id} is {run.status}")
