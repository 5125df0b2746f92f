"""Which fold and which state class belong to which stream: what snapshots need to know."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...domain import candidate, hooks, integration, lease, run, task, worker

__all__ = ["AGGREGATES", "state_class_of"]

# stream prefix (before ':') -> (the aggregate's fold, the class of its state)
AGGREGATES: dict[str, tuple[Callable[..., Any], type]] = {
    "run": (run.apply, run.Run),
    "task": (task.apply, task.Task),
    "worker": (worker.apply, worker.Worker),
    "lease": (lease.apply, lease.Lease),
    "candidate": (candidate.apply, candidate.Candidate),
    "integration": (integration.apply, integration.Integration),
    "hooks": (hooks.apply, hooks.Hooks),
}
_CLASS_OF_FOLD = {fold: cls for fold, cls in AGGREGATES.values()}


def state_class_of(fold: Callable[..., Any]) -> type | None:
    return _CLASS_OF_FOLD.get(fold)
