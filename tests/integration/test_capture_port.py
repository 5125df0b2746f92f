"""The CapturePort's promises, held alike by DulwichCapture over a real repository and by FakeCapture.

The capture itself is tested at length in test_capture.py; here the port's contract: what capture_twice returns
and raises, and the trees of commits read back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.world.git.capture import Capture, DulwichCapture
from docket.domain.kernel.errors import Conflict, Refused
from tests.conftest import git
from tests.fakes.capture import FakeCapture
from tests.fakes.repository import FakeRepository


class RealWorld:
    """A real checkout, captured and read through DulwichCapture."""

    def __init__(self, repo: Path):
        self.checkout, self.common, self.port = repo, repo / ".git", DulwichCapture()
        self.base = git(repo, "rev-parse", "HEAD")

    def write(self, name: str) -> None:
        (self.checkout / name).write_text("new\n")

    def commit_folder(self, folder: str, names: list[str]) -> str:
        for name in names:
            (self.checkout / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (self.checkout / folder / name).write_text(name)
        git(self.checkout, "add", folder)
        git(self.checkout, "commit", "-q", "-m", "reports")
        return git(self.checkout, "rev-parse", "HEAD")

    def tree_of(self, commit: str) -> str:
        return git(self.checkout, "rev-parse", f"{commit}^{{tree}}")


class FakeWorld:
    """The same promises as plain values: the test sets what a capture returns and what a tree holds."""

    def __init__(self, tmp_path: Path):
        self.checkout, self.common = tmp_path / "repo", tmp_path / "repo" / ".git"
        self.repository = FakeRepository()
        self.base = self.repository.add_commit((), self.repository.add_tree("base"), "first")
        self.port = FakeCapture({self.common: self.repository})

    def write(self, name: str) -> None:
        self.port.captures[self.checkout] = Capture(self.base, self.repository.add_tree(name), (name,))

    def commit_folder(self, folder: str, names: list[str]) -> str:
        commit = self.repository.add_commit((self.base,), self.repository.add_tree(folder), "reports")
        self.port.tracked[(commit, folder)] = list(names)
        return commit

    def tree_of(self, commit: str) -> str:
        return self.repository.commits[commit][1]


@pytest.fixture(params=["dulwich", "fake"])
def world(request, tmp_path: Path):  # noqa: ANN201
    if request.param == "fake":
        return FakeWorld(tmp_path)
    return RealWorld(request.getfixturevalue("repo"))


def test_a_stable_worktree_is_captured_on_its_head_with_what_changed(world) -> None:
    world.write("new.txt")
    captured = world.port.capture_twice(world.checkout, expected_head=world.base, base=world.base, artifact_dir=None)
    assert isinstance(captured, Capture)
    assert (captured.head, captured.changed) == (world.base, ("new.txt",)) and len(captured.tree) == 40


def test_a_head_other_than_the_expected_one_is_a_conflict(world) -> None:
    world.write("new.txt")
    with pytest.raises(Conflict) as moved:
        world.port.capture_twice(world.checkout, expected_head="b" * 40, base=world.base, artifact_dir=None)
    assert moved.value.code == "head-moved"


def test_what_is_no_worktree_is_refused_as_unreadable(world, tmp_path: Path) -> None:
    with pytest.raises(Refused) as unreadable:
        world.port.capture_twice(tmp_path / "nowhere", expected_head=None, base=world.base, artifact_dir=None)
    assert unreadable.value.code == "worktree-unreadable"


def test_a_commit_tree_is_read_back_and_a_missing_commit_is_a_key_error(world) -> None:
    assert world.port.commit_tree(world.common, world.base) == world.tree_of(world.base)
    with pytest.raises(KeyError):
        world.port.commit_tree(world.common, "f" * 40)


def test_the_files_under_a_folder_of_a_commit_are_listed_sorted(world) -> None:
    commit = world.commit_folder("reports", ["b.xml", "a.xml", "deep/c.xml"])
    assert world.port.tree_paths(world.common, commit, "reports/") == ["a.xml", "b.xml", "deep/c.xml"]
    assert world.port.tree_paths(world.common, commit, "elsewhere") == []


def test_the_repository_identity_is_read_through_every_port(world, tmp_path: Path) -> None:
    assert world.port.identity(tmp_path / "nowhere" / ".git") is None
