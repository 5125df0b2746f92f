"""Where a run's time went, task by task: its agents' generations, its checks, its merge steps and its waits for a
person, each a span from the event that began it to the one that ended it. Pure: the caller reads the events.

A span still open ends at ``now``; its ``open`` says so. A task's lane holds its spans in the order they began.

The time axis spans the run's own life: from its opening to its closing, or to now while it is open. What the ledger
records in the run's streams after it closed (a `docket gc` releasing its candidates days later, a worker's exit
observed late) is not the run's time: it never stretches the axis, and a span it ends is drawn up to the close.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..kernel.values import to_ms

__all__ = ["Lane", "Span", "Timeline", "timeline"]

Kind = Literal["agent", "check", "merge", "wait"]

_BEGINS: dict[str, Kind] = {"WorkerLaunched": "agent", "CheckRequested": "check",
                            "IntegrationStepRequested": "merge", "QuestionAsked": "wait"}
_ENDS: dict[str, Kind] = {"WorkerExited": "agent", "WorkerLost": "agent", "WorkerLaunchFailed": "agent",
                          "CheckPassed": "check", "CheckFailed": "check", "CheckTimedOut": "check",
                          "IntegrationStepVerified": "merge", "IntegrationStepRejected": "merge",
                          "IntegrationStepConflicted": "merge", "IntegrationStepFailed": "merge",
                          "QuestionAnswered": "wait", "QuestionExpired": "wait"}


@dataclass(frozen=True)
class Span:
    kind: Kind
    start_ms: int
    end_ms: int
    label: str  # what it was: "generation 2", "check tests", "step 3", "question"
    outcome: str  # how it ended: the ending event's result, or "running"
    open: bool = False


@dataclass(frozen=True)
class Lane:
    task_id: str
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Timeline:
    start_ms: int
    end_ms: int
    lanes: tuple[Lane, ...] = field(default_factory=tuple)


def _key(kind: Kind, p: Mapping[str, Any]) -> tuple[Any, ...]:
    """What pairs a span's beginning with its end."""
    if kind == "agent":
        return ("agent", p.get("worker_id"), p.get("generation"))
    if kind == "check":
        return ("check", p.get("check_id"))
    if kind == "merge":
        return ("merge", p.get("step"))
    return ("wait", p.get("request_key"))


def _outcome(name: str, p: Mapping[str, Any]) -> str:
    return {"WorkerExited": str(p.get("cause") or "exited"), "WorkerLost": "lost",
            "WorkerLaunchFailed": "launch-failed", "CheckPassed": "passed", "CheckFailed": "failed",
            "CheckTimedOut": "timed-out", "IntegrationStepVerified": "verified",
            "IntegrationStepRejected": "rejected", "IntegrationStepConflicted": "conflicted",
            "IntegrationStepFailed": "failed", "QuestionAnswered": "answered",
            "QuestionExpired": "expired"}.get(name, "ended")


def timeline(events: Iterable[tuple[str, str, Mapping[str, Any]]], tasks: Iterable[str], opened_at: str,
             now: str, closed_at: str | None = None) -> Timeline:
    """The run's timeline from its events (type name without version, recorded_at, payload), in ledger order; tasks
    in the order their lanes are drawn. closed_at: when the run closed (None: it is open, and its axis ends now, or
    at its latest event if the clock stood behind it)."""
    order = list(tasks)
    begun: dict[tuple[Any, ...], tuple[str, Kind, int, str]] = {}  # key -> (task, kind, start, label)
    steps: dict[Any, str] = {}
    spans: dict[str, list[Span]] = {task: [] for task in order}
    start = to_ms(opened_at)
    closed = to_ms(closed_at) if closed_at is not None else None
    end = closed if closed is not None else to_ms(now)
    for name, at, p in events:
        moment = to_ms(at) if closed is None else min(to_ms(at), closed)
        end = max(end, moment)
        if name in _BEGINS:
            kind = _BEGINS[name]
            task = p.get("task_id") or p.get("worker_id")
            if kind == "merge":
                steps[p.get("step")] = str(task)
            label = {"agent": f"generation {p.get('generation')}", "check": f"check {p.get('check')}",
                     "merge": f"step {p.get('step')}", "wait": "question"}[kind]
            key = _key(kind, p)
            if task in spans and key not in begun:
                begun[key] = (str(task), kind, moment, label)
        elif name in _ENDS:
            key = _key(_ENDS[name], p)
            if key in begun:
                task, kind, began, label = begun.pop(key)
                spans[task].append(Span(kind, began, max(began, moment), label, _outcome(name, p)))
    for task, kind, began, label in begun.values():
        spans[task].append(Span(kind, began, max(began, end), label, "running", open=True))
    lanes = tuple(Lane(task, tuple(sorted(spans[task], key=lambda s: (s.start_ms, s.kind)))) for task in order)
    return Timeline(start, max(end, start + 1), lanes)
