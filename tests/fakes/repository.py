"""What the fake git ports share: repositories as plain values, keyed by git common dir, and what else is at a
path. Each fake port is made over one FakeWorld, or over a mapping of repositories (a world of its own)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FakeGitPort", "FakeRepository", "FakeWorld", "ancestors", "ref_value"]


@dataclass
class FakeRepository:
    """A repository as plain dicts: branch -> object id, object id -> object type."""

    identity: str | None = None
    branches: dict[str, str] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)
    readable: bool = True  # False: its refs and objects cannot be read (its identity still can)
    worktrees: dict[Path, str | None] = field(default_factory=dict)  # linked worktree -> its branch (None: detached)
    stale: dict[Path, str | None] = field(default_factory=dict)  # admin entries whose path holds nothing -> branch
    main_branch: str | None = None  # the branch the main checkout has out
    refs: dict[str, str] = field(default_factory=dict)  # full ref names other than branches -> object id
    commits: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)  # commit -> (parents, tree)
    detached: dict[Path, str] = field(default_factory=dict)  # detached linked worktree -> its HEAD commit
    changed: dict[Path, set[str]] = field(default_factory=dict)  # worktree -> relative paths changed or added in it
    output: dict[Path, set[str]] = field(default_factory=dict)  # execution -> untracked files its check wrote

    def point(self, branch: str, kind: str = "commit") -> str:
        """Point branch at a new object of that type; returns the object's id."""
        oid = hashlib.sha1(f"{kind} {len(self.objects)} {branch}".encode()).hexdigest()
        self.objects[oid] = kind
        self.branches[branch] = oid
        return oid

    def add_tree(self, label: str) -> str:
        """A new tree object; returns its id."""
        oid = hashlib.sha1(f"tree {len(self.objects)} {label}".encode()).hexdigest()
        self.objects[oid] = "tree"
        return oid

    def add_commit(self, parents: tuple[str, ...], tree: str, message: str) -> str:
        """The commit of tree on parents (its id depends on them alone, as a pin's does); returns its id."""
        oid = hashlib.sha1(f"commit {parents} {tree} {message}".encode()).hexdigest()
        self.objects[oid] = "commit"
        self.commits[oid] = (parents, tree)
        return oid



class FakeWorld:
    """The repositories the fake git ports see, and what else is at a path ("a file", "a directory", "a symlink ...")."""

    def __init__(self, repositories: Mapping[str | Path, FakeRepository] | None = None):
        self.repositories = {Path(path): repo for path, repo in (repositories or {}).items()}
        self.occupied: dict[Path, str] = {}


class FakeGitPort:
    """What every fake git port does alike (a RepositoryPort): its world, and whose a repository is."""

    def __init__(self, world: FakeWorld | Mapping[str | Path, FakeRepository] | None = None):
        self.world = world if isinstance(world, FakeWorld) else FakeWorld(world)

    @property
    def repositories(self) -> dict[Path, FakeRepository]:
        return self.world.repositories

    @property
    def occupied(self) -> dict[Path, str]:
        return self.world.occupied

    def identity(self, repository: Path) -> str | None:
        repo = self.repositories.get(Path(repository))
        return repo.identity if repo is not None else None


def ref_value(repo: FakeRepository, ref: str) -> str | None:
    if ref.startswith("refs/heads/"):
        return repo.branches.get(ref.removeprefix("refs/heads/"))
    return repo.refs.get(ref)


def ancestors(repo: FakeRepository, commit: str) -> set[str]:
    """commit and every commit reachable from it through FakeRepository.commits."""
    seen, todo = set(), [commit]
    while todo:
        oid = todo.pop()
        if oid not in seen:
            seen.add(oid)
            todo.extend(repo.commits.get(oid, ((), ""))[0])
    return seen

