"""In-memory fakes of the ports, keeping the real adapters' promises (the contract tests hold both to them)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...domain.effects import BranchObservation

__all__ = ["FakeGit", "FakeRepository"]


@dataclass
class FakeRepository:
    """A repository as plain dicts: branch -> object id, object id -> object type."""

    identity: str | None = None
    branches: dict[str, str] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)
    readable: bool = True  # False: its refs and objects cannot be read (its identity still can)

    def point(self, branch: str, kind: str = "commit") -> str:
        """Point branch at a new object of that type; returns the object's id."""
        oid = hashlib.sha1(f"{kind} {len(self.objects)} {branch}".encode()).hexdigest()
        self.objects[oid] = kind
        self.branches[branch] = oid
        return oid


class FakeGit:
    """The GitPort over FakeRepository values, keyed by git common dir."""

    def __init__(self, repositories: Mapping[str | Path, FakeRepository] | None = None):
        self.repositories = {Path(path): repo for path, repo in (repositories or {}).items()}
        self.observed: list[tuple[Path, str]] = []

    def identity(self, repository: Path) -> str | None:
        repo = self.repositories.get(Path(repository))
        return repo.identity if repo is not None else None

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        self.observed.append((Path(repository), branch))
        repo = self.repositories.get(Path(repository))
        if repo is None:
            return BranchObservation("unreadable", detail=f"cannot open repository {repository}: no repository there")
        if not repo.readable:
            return BranchObservation("unreadable", detail=f"cannot read {repository}: unreadable")
        ref = f"refs/heads/{branch}"
        oid = repo.branches.get(branch)
        if oid is None:
            return BranchObservation("missing")
        kind = repo.objects.get(oid)
        if kind is None:
            return BranchObservation("unreadable", detail=f"{ref} names missing object {oid}")
        if kind != "commit":
            return BranchObservation("not-a-commit", detail=f"{ref} names a {kind}")
        return BranchObservation("found", commit=oid)
