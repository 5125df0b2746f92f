"""What the capture's faster walk must still see: files added or removed between the two captures of a pin, and
nested repositories however their ``.git`` is made, wherever they sit."""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.world.git.capture import Capture, Unstable, capture, capture_twice
from tests.conftest import git


@pytest.fixture
def work(tmp_path: Path) -> Path:
    repo = tmp_path / "work"
    (repo / "dir" / "sub").mkdir(parents=True)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a\n")
    (repo / "dir" / "b.txt").write_text("b\n")
    (repo / "dir" / "sub" / "c.txt").write_text("c\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "base")
    return repo


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_file_added_between_the_two_captures_is_unstable(work):
    base = head(work)
    (work / "a.txt").write_text("changed before\n")

    got = capture_twice(work, expected_head=base, base=base, artifact_dir=None,
                        between=lambda: (work / "dir" / "sub" / "late.txt").write_text("added between\n"))

    assert isinstance(got, Unstable)
    assert got.first.changed == ("a.txt",) and got.second.changed == ("a.txt", "dir/sub/late.txt")
    assert got.differing == ("dir/sub/late.txt",)


def test_a_file_removed_between_the_two_captures_is_unstable(work):
    base = head(work)

    got = capture_twice(work, expected_head=base, base=base, artifact_dir=None,
                        between=lambda: (work / "dir" / "sub" / "c.txt").unlink())

    assert isinstance(got, Unstable)
    assert got.first.changed == () and got.second.changed == ("dir/sub/c.txt",)
    assert got.differing == ("dir/sub/c.txt",)


@pytest.mark.parametrize("git_file", [False, True], ids=["git-folder", "git-file"])
def test_a_nested_repository_deep_in_a_tracked_folder_is_left_out_whatever_its_git_is(work, git_file):
    base = head(work)
    inner = work / "dir" / "sub" / "vendored"
    inner.mkdir()
    if git_file:  # as a linked worktree or an absorbed submodule has it
        (inner / ".git").write_text("gitdir: /nowhere\n")
    else:
        git(inner, "init", "-q", "-b", "main")
    (inner / "aaa.txt").write_text("listed before .git, belongs to another repository\n")
    (inner / "zzz.txt").write_text("listed after .git\n")
    (work / "dir" / "sub" / "kept.txt").write_text("beside it, ours\n")

    got = capture_twice(work, expected_head=base, base=base, artifact_dir=None)

    assert isinstance(got, Capture)
    assert got.changed == ("dir/sub/kept.txt",)
    assert capture(work, expected_head=base, base=base, artifact_dir=None) == got
