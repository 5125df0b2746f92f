"""What a run's agents used (tokens, cost), from what they reported, and whether it reached the run's limits. Pure.

Use is kept per generation of a worker: a generation's reports each say what it used *so far*, so of several
reports of one generation, each metric counts the largest of what they say, never their sum (a report repeated,
or a later cumulative one, is not counted twice). A run's use, and a task's, is the sum over their generations.

A metric no report of a generation stated stays None ("not reported"), not 0; it counts as 0 against a limit.
Every figure is clamped to MAX_SAFE_INT.

``REPORT_TYPES`` names the events that carry a generation's use (``input_tokens``, ``output_tokens``,
``cost_micro_usd``, each an int or None, with ``run_id``, ``worker_id`` and ``generation``); an event type added
there (a progress report made while the agent runs, say) is counted by the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .kernel.values import MAX_SAFE_INT

__all__ = ["REPORT_TYPES", "Usage", "by_generation", "by_task", "of_report", "reached", "run_usage"]

# the stored class names (domain.events) whose events report a generation's use so far
REPORT_TYPES: tuple[str, ...] = ("AgentReported", "ProgressReported")

Limit = Literal["cost", "tokens"]


def _plus(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return min(MAX_SAFE_INT, a + b)


def _larger(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return max(a, b)


def _clamped(value: int | None) -> int | None:
    return None if value is None else max(0, min(MAX_SAFE_INT, value))


@dataclass(frozen=True)
class Usage:
    """Tokens in and out and cost in millionths of a US dollar; None: nothing reported of it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_micro_usd: int | None = None

    @property
    def reported(self) -> bool:
        """Whether any report stated any of the three."""
        return not (self.input_tokens is None and self.output_tokens is None and self.cost_micro_usd is None)

    @property
    def tokens(self) -> int | None:
        """Input and output tokens together; None when neither was reported."""
        return _plus(self.input_tokens, self.output_tokens)

    def plus(self, other: Usage) -> Usage:
        """Both together: the use of two generations."""
        return Usage(_plus(self.input_tokens, other.input_tokens), _plus(self.output_tokens, other.output_tokens),
                     _plus(self.cost_micro_usd, other.cost_micro_usd))

    def at_least(self, other: Usage) -> Usage:
        """Each metric the larger of the two: two cumulative reports of one generation."""
        return Usage(_larger(self.input_tokens, other.input_tokens), _larger(self.output_tokens, other.output_tokens),
                     _larger(self.cost_micro_usd, other.cost_micro_usd))


def of_report(report: Any) -> Usage:
    """The use one report states (an event of REPORT_TYPES, or anything with its three fields)."""
    return Usage(_clamped(report.input_tokens), _clamped(report.output_tokens), _clamped(report.cost_micro_usd))


def by_generation(reports: Iterable[Any]) -> dict[tuple[str, int], Usage]:
    """Each (worker id, generation)'s use: of its reports, each metric's largest."""
    found: dict[tuple[str, int], Usage] = {}
    for report in reports:
        key = (report.worker_id, report.generation)
        found[key] = found.get(key, Usage()).at_least(of_report(report))
    return found


def _total(usages: Iterable[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total.plus(usage)
    return total


def run_usage(reports: Iterable[Any], run_id: str) -> Usage:
    """The run's use: the sum over its generations (reports of other runs are ignored)."""
    return _total(by_generation(r for r in reports if r.run_id == run_id).values())


def by_task(reports: Iterable[Any], task_of: Mapping[str, str | None], run_id: str) -> dict[str, Usage]:
    """Each task's use in the run (task_of: worker id -> its task id); workers of no task are left out."""
    tasks: dict[str, Usage] = {}
    for (worker_id, _), usage in by_generation(r for r in reports if r.run_id == run_id).items():
        task_id = task_of.get(worker_id)
        if task_id is not None:
            tasks[task_id] = tasks.get(task_id, Usage()).plus(usage)
    return tasks


def reached(usage: Usage, max_cost_micro_usd: int | None, max_tokens: int | None) -> tuple[Limit, int, int] | None:
    """(which limit, the limit, what was used) of the first limit the use has reached (cost before tokens); None
    while below both. A metric not reported counts as 0."""
    cost, tokens = usage.cost_micro_usd or 0, usage.tokens or 0
    if max_cost_micro_usd is not None and cost >= max_cost_micro_usd:
        return "cost", max_cost_micro_usd, cost
    if max_tokens is not None and tokens >= max_tokens:
        return "tokens", max_tokens, tokens
    return None
