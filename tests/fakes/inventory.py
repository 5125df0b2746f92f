"""The InventoryPort's fake: branches, docket's refs and worktrees over FakeRepository values."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from docket.adapters.world.git.inventory import DOCKET_REFS, check_docket_ref, check_removal, worktree_kind
from docket.domain.effects import BranchObservation, DocketWorktree

from .repository import FakeGitPort, FakeRepository, FakeWorld

__all__ = ["FakeInventory"]


class FakeInventory(FakeGitPort):
    """The InventoryPort over FakeRepository values; observed lists the branches read."""

    def __init__(self, world: FakeWorld | Mapping[str | Path, FakeRepository] | None = None):
        super().__init__(world)
        self.observed: list[tuple[Path, str]] = []

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

    def branch_tip(self, repository: Path, branch: str) -> str | None:
        return self.observe_branch(repository, branch).commit

    def list_docket_refs(self, repository: Path) -> list[tuple[str, str]]:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return []
        return sorted((ref, oid) for ref, oid in repo.refs.items() if ref.startswith(DOCKET_REFS))

    def list_docket_worktrees(self, repository: Path, root: Path | None = None) -> list[DocketWorktree]:
        """As the real listing, over worktrees, stale entries and occupied paths at docket's worktree places; an
        admin entry's name is the path's last part."""
        common = Path(repository)
        repo = self.repositories.get(common)
        if repo is None:
            return []
        places = {p for p in (*repo.worktrees, *repo.stale, *self.occupied) if worktree_kind(common, p) is not None}
        found = []
        for path in sorted(places):
            head, branch = self.observe_head(common, path)
            registered = path in repo.worktrees or path in repo.stale
            exists = path in repo.worktrees or path in self.occupied
            detail = f"{path} is {self.occupied[path]}" if path in self.occupied else ""
            found.append(DocketWorktree(str(path), worktree_kind(common, path), exists, registered, branch, head,
                                        path.name if registered else None, detail))
        return found

    def observe_head(self, repository: Path, worktree: Path) -> tuple[str | None, str | None]:
        repo = self.repositories.get(Path(repository))
        path = Path(worktree)
        if repo is None or path in self.occupied:
            return None, None
        held = repo.worktrees if path in repo.worktrees else repo.stale
        if path not in held:
            return None, None
        branch = held[path]
        if branch is not None:
            return (repo.branches.get(branch) if repo.readable else None), branch
        return repo.detached.get(path), None

    def owns_branch(self, repository: Path, path: Path) -> str | None:
        return self.observe_head(repository, path)[1]

    def remove_worktree(self, repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                        group_alive: bool = False) -> None:
        """As the real removal; an occupied path described as "a symlink..." or "a file..." is left alone, any
        other occupied path is an unregistered folder."""
        common, path = Path(repository), Path(path)
        check_removal(common, path, branch=branch, group_alive=group_alive)
        repo = self.repositories.get(common)
        if repo is None or not repo.readable:
            return
        occupied = self.occupied.get(path, "")
        if occupied.startswith(("a symlink", "a file")):
            return
        head, on = self.observe_head(common, path)
        if path in repo.worktrees or occupied:
            if path not in repo.worktrees and (expected_head is not None or branch is not None):
                return
            if expected_head is not None and head != expected_head:
                return
            if branch is not None and on != branch:
                return
        for held in (repo.worktrees, repo.stale, repo.detached, repo.changed, self.occupied):
            held.pop(path, None)
        if branch is None:
            return
        expected = expected_head if expected_head is not None else (head if on == branch else None)
        if expected is None or branch in repo.worktrees.values() or repo.main_branch == branch:
            return
        if repo.branches.get(branch) == expected:
            del repo.branches[branch]

    def delete_ref(self, repository: Path, ref: str, expected: str) -> None:
        check_docket_ref(ref)
        repo = self.repositories.get(Path(repository))
        if repo is not None and repo.readable and repo.refs.get(ref) == expected:
            del repo.refs[ref]

    def stale_locks(self, repository: Path) -> list[str]:
        return []  # a fake repository has no lock files

    def remove_stale_lock(self, repository: Path, lock: str) -> bool:
        return True
