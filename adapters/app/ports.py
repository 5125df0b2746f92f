"""The world as the effector sees it: one small Protocol per kind of effect.

Each port has a real adapter and an in-memory fake (``adapters/fakes.py``) that
keeps the same promises, so the effector's rules are tested without disk. The
real adapters are chosen here, and only here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ...domain.effects import BranchObservation

__all__ = ["GitPort", "Ports", "real_ports"]


class GitPort(Protocol):
    """A git repository, named by its git common dir."""

    def identity(self, repository: Path) -> str | None:
        """The repository's docket identity, or None if it has none."""
        ...

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        """What refs/heads/<branch> names: found, missing, not-a-commit or unreadable. Never raises."""
        ...


@dataclass(frozen=True)
class Ports:
    """Every port an intent kind may name (processes come next)."""

    git: GitPort


def real_ports() -> Ports:
    from ..world.git import DulwichGit

    return Ports(git=DulwichGit())
