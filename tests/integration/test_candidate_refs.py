"""Candidate refs: observe, pin (create-only, idempotent) and release (compare-and-swap), against real git and
FakeCandidateRefs alike; real git must agree with what docket wrote."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fakes.candidate_refs import FakeCandidateRefs
from tests.fakes.repository import FakeRepository
from docket.adapters.world.git.candidates import DulwichCandidateRefs
from docket.domain.binding import candidate_ref
from tests.conftest import git

REF = candidate_ref("run-7k2m9x4q", "0123456789abcdef" * 4)
MESSAGE = "docket candidate run-7k2m9x4q"


def make_tree(repo: Path, files: dict[str, str]) -> str:
    """A tree of HEAD's files plus files, written with git in a private index."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo.parent / f"index-{len(files)}-{abs(hash(str(files)))}")}

    def run(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, check=True, capture_output=True,
                              text=True).stdout.strip()

    run("read-tree", "HEAD")
    for name, text in files.items():
        blob = run("hash-object", "-w", "--stdin", stdin=text)
        run("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
    return run("write-tree")


class RealWorld:
    def __init__(self, repo: Path):
        self.checkout, self.common, self.port = repo, repo / ".git", DulwichCandidateRefs()
        self.head = git(repo, "rev-parse", "HEAD")
        self.tree = make_tree(repo, {"work.txt": "done\n"})
        self.other_tree = make_tree(repo, {"other.txt": "else\n"})

    def named(self) -> str | None:
        result = subprocess.run(["git", "rev-parse", "-q", "--verify", REF], cwd=self.checkout, capture_output=True,
                                text=True)
        return result.stdout.strip() or None

    def plant(self, tree: str) -> str:
        commit = git(self.checkout, "commit-tree", tree, "-p", self.head, "-m", "planted")
        git(self.checkout, "update-ref", REF, commit)
        return commit


class FakeWorld:
    def __init__(self, tmp_path: Path):
        self.common = tmp_path / "repo" / ".git"
        self.repository = FakeRepository()
        self.head = self.repository.point("main")
        self.tree, self.other_tree = self.repository.add_tree("work"), self.repository.add_tree("other")
        self.port = FakeCandidateRefs({self.common: self.repository})

    def named(self) -> str | None:
        return self.repository.refs.get(REF)

    def plant(self, tree: str) -> str:
        commit = self.repository.add_commit((self.head,), tree, "planted")
        self.repository.refs[REF] = commit
        return commit


@pytest.fixture(params=["dulwich", "fake"])
def world(request, tmp_path: Path):  # noqa: ANN201
    if request.param == "fake":
        return FakeWorld(tmp_path)
    return RealWorld(request.getfixturevalue("repo"))


def observe(world):  # noqa: ANN001, ANN201
    return world.port.observe_candidate(world.common, REF, world.head, world.tree)


def pin(world) -> None:  # noqa: ANN001
    world.port.pin_candidate(world.common, REF, world.head, world.tree, MESSAGE)


def test_missing_then_pinned_is_matching(world) -> None:
    assert observe(world).state == "missing"
    pin(world)
    observed = observe(world)
    assert observed.state == "matching"
    assert observed.commit == world.named()


def test_pinning_twice_makes_the_same_commit(world) -> None:
    pin(world)
    first = world.named()
    pin(world)
    assert world.named() == first
    world.port.release_candidate(world.common, REF, first)
    assert observe(world).state == "missing"
    pin(world)
    assert world.named() == first  # the commit's id depends on (parent, tree, message) alone


def test_a_ref_planted_by_hand_with_another_tree_diverges_and_is_left_untouched(world) -> None:
    planted = world.plant(world.other_tree)
    observed = observe(world)
    assert (observed.state, observed.commit) == ("diverged", planted)
    assert world.other_tree in observed.detail
    pin(world)
    assert world.named() == planted
    assert observe(world).state == "diverged"


def test_a_planted_ref_with_the_same_parent_and_tree_is_adopted(world) -> None:
    planted = world.plant(world.tree)
    assert observe(world).state == "matching"
    pin(world)
    assert world.named() == planted


def test_release_with_a_wrong_expected_commit_leaves_the_ref(world) -> None:
    pin(world)
    pinned = world.named()
    world.port.release_candidate(world.common, REF, world.head)
    assert world.named() == pinned
    world.port.release_candidate(world.common, REF, pinned)
    assert world.named() is None
    world.port.release_candidate(world.common, REF, pinned)  # absent counts as released
    assert observe(world).state == "missing"


def test_nothing_is_pinned_for_a_tree_or_parent_the_repository_lacks(world) -> None:
    world.port.pin_candidate(world.common, REF, world.head, "f" * 40, MESSAGE)
    world.port.pin_candidate(world.common, REF, "f" * 40, world.tree, MESSAGE)
    assert world.named() is None


def test_an_unreadable_repository_is_unreadable(tmp_path: Path) -> None:
    observed = DulwichCandidateRefs().observe_candidate(tmp_path / "nowhere", REF, "a" * 40, "b" * 40)
    assert observed.state == "unreadable"


def test_real_git_agrees_with_the_pinned_commit(repo: Path) -> None:
    world = RealWorld(repo)
    pin(world)
    commit = world.named()
    assert git(repo, "rev-parse", f"{commit}^{{tree}}") == world.tree
    assert git(repo, "rev-list", "--parents", "-n", "1", commit).split() == [commit, world.head]
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", commit) == \
        f"docket <docket@localhost>|docket <docket@localhost>|{MESSAGE}"
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/docket/") == REF
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert (fsck.returncode, fsck.stdout, fsck.stderr) == (0, "", "")


def test_the_target_history_is_what_git_reaches_from_the_branch_back_to_the_base(repo: Path) -> None:
    from docket.adapters.world.git.candidates import observe_target_history

    world = RealWorld(repo)
    (repo / "base.txt").write_text("base\n")
    git(repo, "add", "base.txt")
    git(repo, "commit", "-q", "-m", "the run's base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "work")
    (repo / "work.txt").write_text("work\n")
    git(repo, "add", "work.txt")
    git(repo, "commit", "-q", "-m", "a candidate")
    candidate = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "trunk", base)
    git(repo, "merge", "-q", "--no-ff", "-m", "merged", candidate)

    history = world.port.observe_target_history(world.common, "trunk", base)
    expected = git(repo, "rev-list", "trunk", f"^{base}^").split()
    assert set(history.commits) == set(expected) and len(expected) == 3  # the merge, the candidate, the base
    assert history.complete and history.tip == git(repo, "rev-parse", "trunk")
    assert history.commits[candidate] == (git(repo, "rev-parse", f"{candidate}^{{tree}}"), (base,))
    assert world.head not in history.commits  # older than the base: not walked
    bounded = observe_target_history(world.common, "trunk", base, limit=2)
    assert len(bounded.commits) == 2 and not bounded.complete and "at most 2" in bounded.detail
    missing = world.port.observe_target_history(world.common, "nosuch", base)
    assert (missing.tip, missing.commits, missing.complete) == (None, {}, True)
    unreadable = DulwichCandidateRefs().observe_target_history(repo.parent / "nowhere", "trunk", base)
    assert unreadable.tip is None and not unreadable.complete and "cannot open" in unreadable.detail


def test_the_fake_target_history_walks_the_same_way(tmp_path: Path) -> None:
    world = FakeWorld(tmp_path)
    base = world.repository.add_commit((world.head,), world.tree, "base")
    pinned = world.repository.add_commit((base,), world.other_tree, "candidate")
    world.repository.commits[world.head] = ((), world.tree)
    world.repository.branches["trunk"] = merge = world.repository.add_commit((base, pinned), world.other_tree, "m")
    history = world.port.observe_target_history(world.common, "trunk", base)
    assert set(history.commits) == {merge, pinned, base} and history.complete and history.tip == merge
    assert world.port.observe_target_history(world.common, "nosuch", base).tip is None
