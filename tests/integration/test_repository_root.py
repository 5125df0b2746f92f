"""repository_root: the one place relative resource names are relative to, from any worktree of a repository."""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.files.paths import repository_root

from ..conftest import git


def test_the_main_worktree_top_from_anywhere_inside(repo: Path, tmp_path: Path):
    (repo / "a" / "b").mkdir(parents=True)
    assert repository_root(repo) == repo.resolve()
    assert repository_root(repo / "a" / "b") == repo.resolve()
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"))
    assert repository_root(tmp_path / "linked") == repo.resolve()


def test_a_bare_repository_is_its_own_root(tmp_path: Path):
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    assert repository_root(bare) == bare.resolve()


def test_outside_a_repository_there_is_none(tmp_path: Path):
    assert repository_root(tmp_path) is None
