"""Which fold and which state class belong to which stream: what snapshots need to know.

Each aggregate's domain module is imported when a stream of its kind is first met, not before: a command that only
plans a task never imports the integration's or the hooks' (which would import most of the event catalogue).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["AGGREGATES", "aggregate_of", "state_class_of"]

# stream prefix (before ':') -> (the domain module with its fold, ``apply``, and the class of its state)
AGGREGATES: dict[str, tuple[str, str]] = {
    "run": ("run", "Run"),
    "task": ("task", "Task"),
    "worker": ("worker", "Worker"),
    "lease": ("lease", "Lease"),
    "candidate": ("candidate", "Candidate"),
    "integration": ("merge_queue.integration_state", "Integration"),
    "hooks": ("hooks", "Hooks"),
    "request": ("requests", "Request"),
}
_DOMAIN = __name__.rsplit(".", 4)[0] + ".domain"  # docket.domain


def aggregate_of(prefix: str) -> tuple[Callable[..., Any], type] | None:
    """(fold, state class) of the streams named ``<prefix>:...``; None for a prefix no aggregate has."""
    found = AGGREGATES.get(prefix)
    if found is None:
        return None
    module = importlib.import_module(f"{_DOMAIN}.{found[0]}")
    return module.apply, getattr(module, found[1])


def state_class_of(fold: Callable[..., Any]) -> type | None:
    for module, cls in AGGREGATES.values():
        if getattr(fold, "__module__", None) == f"{_DOMAIN}.{module}" and getattr(fold, "__name__", "") == "apply":
            return getattr(importlib.import_module(f"{_DOMAIN}.{module}"), cls)
    return None
