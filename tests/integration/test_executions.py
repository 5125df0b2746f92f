"""Executions: repositories of their own detached at a candidate commit, borrowing the user's objects, against real
git (and the main cases against FakeWorkspaces); real git must agree (`git status`, `git fsck --strict`), and the
user's repository gets no linked worktree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.workspaces.executions import execution_path
from docket.adapters.world.files.paths import repository_key
from tests.fakes.repository import FakeRepository
from tests.fakes.workspaces import FakeWorkspaces
from docket.adapters.world.workspaces.port import DulwichWorkspaces
from docket.adapters.world.processes.lifecycle import PsutilProcesses
from docket.domain.kernel.errors import BadInput, Refused
from tests.conftest import git
from tests.integration.port_worlds import world_fixture

RUN, BINDING, ARTIFACTS = "run-7k2m9x4q", "0123456789abcdef" * 4, "out"


def fsck(repo: Path) -> None:
    result = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def worktrees(repo: Path) -> dict[str, list[str]]:
    listed = git(repo, "worktree", "list", "--porcelain")
    found = {}
    for block in listed.split("\n\n"):
        lines = block.splitlines()
        found[lines[0].removeprefix("worktree ")] = lines[1:]
    return found


class RealWorld:
    def __init__(self, repo: Path):
        self.checkout, self.common, self.port = repo, repo / ".git", DulwichWorkspaces()
        (repo / "src").mkdir()
        (repo / "src" / "app.py").write_text("print('hi')\n")
        (repo / "run.sh").write_text("#!/bin/sh\necho run\n")
        (repo / "run.sh").chmod(0o755)
        os.symlink("README.md", repo / "link")
        (repo / ".gitignore").write_text("*.pyc\nbuild/\n")
        (repo / ARTIFACTS).mkdir()
        (repo / ARTIFACTS / "keep.txt").write_text("tracked in the artifact folder\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "candidate")
        self.commit = git(repo, "rev-parse", "HEAD")
        self.earlier = git(repo, "rev-parse", "HEAD~1")
        git(repo, "checkout", "-q", "--detach", self.earlier)  # the main checkout is elsewhere
        self.path = execution_path(self.common, RUN, BINDING, "tests", 1)

    def observe(self, commit: str | None = None):
        return self.port.observe_execution(self.common, self.path, commit or self.commit)

    def create(self) -> None:
        self.port.create_execution(self.common, self.path, self.commit)

    def inspect(self):
        return self.port.inspect_execution(self.common, self.path, self.commit)

    def remove(self, *, group_alive: bool = False) -> None:
        self.port.remove_execution(self.common, self.path, group_alive=group_alive)

    def change(self, rel: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("changed by the check\n")

    def write_output(self, rel: str) -> None:
        self.change(rel)

    def on_branch(self) -> None:
        self.create()
        git(self.path, "checkout", "-q", "-b", "other")

    def plain_folder(self) -> None:
        self.path.mkdir(parents=True)


class FakeWorld:
    def __init__(self, tmp_path: Path):
        self.common = tmp_path / "repo" / ".git"
        self.repository = FakeRepository()
        self.earlier = self.repository.point("main")
        self.commit = self.repository.point("candidate")
        self.port = FakeWorkspaces({self.common: self.repository})
        self.path = execution_path(self.common, RUN, BINDING, "tests", 1)

    observe, create, inspect, remove = RealWorld.observe, RealWorld.create, RealWorld.inspect, RealWorld.remove

    def change(self, rel: str) -> None:
        self.repository.changed.setdefault(self.path, set()).add(rel)

    def write_output(self, rel: str) -> None:
        self.repository.output.setdefault(self.path, set()).add(rel)

    def on_branch(self) -> None:
        self.repository.branches["other"] = self.commit
        self.repository.worktrees[self.path] = "other"

    def plain_folder(self) -> None:
        self.port.occupied[self.path] = "a directory that is not a git worktree"


world = world_fixture(FakeWorld, RealWorld)


@pytest.fixture
def real(repo: Path) -> RealWorld:
    return RealWorld(repo)


def test_the_path_is_in_the_data_folder_and_refuses_unsafe_parts(tmp_path: Path, data_dir: Path) -> None:
    key = repository_key(tmp_path)
    assert execution_path(tmp_path, "r", "b", "lint", 2) == data_dir / "executions" / key / "r" / "b" / "lint-2"
    assert execution_path(tmp_path, "r", "b", "lint", 2, tmp_path / "elsewhere") == \
        tmp_path / "elsewhere" / "executions" / key / "r" / "b" / "lint-2"
    for bad in [("..", "b", "c", 1), ("r", "a/b", "c", 1), ("r", "b", ".hidden", 1), ("r", "b", "c", 0),
                ("r", "b", "", 1), ("r", "b", "c\0", 1)]:
        with pytest.raises(BadInput):
            execution_path(tmp_path, *bad)


def test_absent_then_created_is_ready_and_inspects_matching(world) -> None:
    assert world.observe().state == "absent"
    world.create()
    assert world.observe().state == "ready"
    assert world.inspect().state == "matching"
    world.create()  # creating again changes nothing
    assert world.observe().state == "ready"


def test_ready_only_at_the_commit(world) -> None:
    world.create()
    assert world.observe(world.earlier).state == "diverged"


def test_a_worktree_on_a_branch_is_not_reused(world) -> None:
    world.on_branch()
    assert world.observe().state == "diverged"
    world.create()
    assert world.observe().state == "diverged"
    assert world.inspect().state == "mutated"


def test_a_folder_that_is_no_worktree_is_left_alone(world) -> None:
    world.plain_folder()
    assert world.observe().state == "diverged"
    world.create()
    assert world.observe().state == "diverged"


def test_a_changed_execution_is_not_reused_and_inspects_mutated(world) -> None:
    world.create()
    world.change("src/app.py")
    assert world.observe().state == "diverged"
    assert world.inspect().state == "mutated"


def test_untracked_output_under_the_artifact_folder_still_matches(world) -> None:
    world.create()
    world.write_output(f"{ARTIFACTS}/report.xml")
    assert world.inspect().state == "matching"
    assert world.observe().state == "diverged"  # but it is no longer clean enough to reuse


def test_removal_makes_it_absent_and_is_idempotent(world) -> None:
    world.create()
    world.remove()
    assert world.observe().state == "absent"
    assert world.inspect().state == "missing"
    world.remove()
    assert world.observe().state == "absent"


def test_removal_is_refused_while_the_group_is_alive(world) -> None:
    world.create()
    with pytest.raises(Refused) as caught:
        world.remove(group_alive=True)
    assert caught.value.code == "execution-busy"
    assert world.observe().state == "ready"


# Real git only: what git itself says, and each kind of mutation.


def test_real_git_sees_a_detached_repository_of_its_own_at_the_commit(real: RealWorld) -> None:
    real.create()
    assert str(real.path) not in worktrees(real.checkout)
    assert Path(git(real.path, "rev-parse", "--absolute-git-dir")) == real.path / ".git"
    assert git(real.path, "rev-parse", "--symbolic-full-name", "HEAD") == "HEAD"  # detached
    fsck(real.path)
    assert git(real.path, "status", "--porcelain", "--ignored") == ""
    assert git(real.path, "rev-parse", "HEAD") == real.commit
    assert (real.path / "run.sh").stat().st_mode & 0o111
    assert os.readlink(real.path / "link") == "README.md"
    fsck(real.checkout)


def test_real_git_agrees_after_removal(real: RealWorld) -> None:
    real.create()
    real.remove()
    assert str(real.path) not in worktrees(real.checkout)
    assert not real.path.exists()
    assert not real.path.parent.exists()  # no leftovers next to it: the emptied <binding> and <run> folders go too
    assert not real.path.parent.parent.exists() and real.path.parent.parent.parent.is_dir()
    fsck(real.checkout)


def test_an_interrupted_creation_is_observed_absent_and_completed(real: RealWorld) -> None:
    real.create()
    os.rename(real.path, real.path.parent / ".tests-1.deadbeef.partial")  # as if killed before the rename
    assert real.observe().state == "absent"
    real.create()
    assert real.observe().state == "ready"
    assert sorted(p.name for p in real.path.parent.iterdir()) == ["tests-1"]


@pytest.mark.parametrize("how", ["untracked", "ignored", "staged"])
def test_reuse_needs_a_clean_worktree(real: RealWorld, how: str) -> None:
    real.create()
    if how == "untracked":
        (real.path / "new.txt").write_text("x\n")
    elif how == "ignored":
        (real.path / "cache.pyc").write_text("x\n")
    else:
        (real.path / "README.md").write_text("staged\n")
        git(real.path, "add", "README.md")
    assert real.observe().state == "diverged"


def mutate(real: RealWorld, kind: str) -> None:
    path = real.path
    if kind == "head-moved":
        git(path, "checkout", "-q", "--detach", real.earlier)
    elif kind == "committed":
        (path / "README.md").write_text("agent\n")
        git(path, "commit", "-q", "-am", "sneaky")
    elif kind == "on-a-branch":
        git(path, "checkout", "-q", "-b", "sneaky")
    elif kind == "modified":
        (path / "src" / "app.py").write_text("print('bye')\n")
    elif kind == "deleted":
        (path / "src" / "app.py").unlink()
    elif kind == "mode":
        (path / "src" / "app.py").chmod(0o755)
    elif kind == "symlink-retargeted":
        (path / "link").unlink()
        os.symlink("/etc/passwd", path / "link")
    elif kind == "file-became-symlink":
        (path / "README.md").unlink()
        os.symlink("src/app.py", path / "README.md")
    elif kind == "tracked-folder-became-symlink":  # the same content, reached through a symlink: not the commit's tree
        os.rename(path / "src", path.parent / "src-elsewhere")
        os.symlink(path.parent / "src-elsewhere", path / "src")
    elif kind == "tracked-file-became-folder":
        (path / "run.sh").unlink()
        (path / "run.sh").mkdir()
    elif kind == "tracked-gitignore":
        (path / ".gitignore").write_text("*\n")
    elif kind == "tracked-artifact-changed":
        (path / ARTIFACTS / "keep.txt").write_text("rewritten\n")
    elif kind == "tracked-artifact-deleted":
        (path / ARTIFACTS / "keep.txt").unlink()
    elif kind == "staged-only":
        (path / "README.md").write_text("staged\n")
        git(path, "add", "README.md")
        (path / "README.md").write_text((real.checkout / "README.md").read_text())
    elif kind == "path-is-symlink":
        os.rename(path, path.parent / "moved")
        os.symlink(path.parent / "moved", path)
    elif kind == "path-is-file":
        os.rename(path, path.parent / "moved")
        path.write_text("not a folder\n")
    else:
        raise AssertionError(kind)


MUTATIONS = ["head-moved", "committed", "on-a-branch", "modified", "deleted", "mode", "symlink-retargeted",
             "file-became-symlink", "tracked-folder-became-symlink", "tracked-file-became-folder", "tracked-gitignore",
             "tracked-artifact-changed", "tracked-artifact-deleted", "staged-only", "path-is-symlink",
             "path-is-file"]


def write_output(path: Path, kind: str) -> None:
    """What a check writes for itself: never a change of the commit it checks, whatever git would ignore."""
    if kind == "bytecode":  # an import without PYTHONDONTWRITEBYTECODE
        (path / "src" / "__pycache__").mkdir()
        (path / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\0")
    elif kind == "pytest-cache":  # ignored by the .gitignore pytest writes inside it
        (path / ".pytest_cache" / "v" / "cache").mkdir(parents=True)
        (path / ".pytest_cache" / ".gitignore").write_text("# Created by pytest automatically.\n*\n")
        (path / ".pytest_cache" / "v" / "cache" / "nodeids").write_text("[]\n")
    elif kind == "report-at-the-root":  # not ignored, not under artifact_dir
        (path / "junit.xml").write_text("<testsuites/>\n")
    elif kind == "untracked-file":
        (path / "src" / "new.py").write_text("x\n")
    elif kind == "untracked-gitignore":
        (path / "src" / ".gitignore").write_text("*\n")
    elif kind == "untracked-folder":
        (path / ".venv" / "lib").mkdir(parents=True)
        for n in range(50):
            (path / ".venv" / "lib" / f"m{n}.py").write_text("x\n")
    elif kind == "untracked-symlink":
        os.symlink("/etc/passwd", path / "src" / "passwd")
    elif kind == "fifo":
        os.mkfifo(path / "pipe")
    else:
        raise AssertionError(kind)


OUTPUTS = ["bytecode", "pytest-cache", "report-at-the-root", "untracked-file", "untracked-gitignore",
           "untracked-folder", "untracked-symlink", "fifo"]


@pytest.mark.parametrize("kind", OUTPUTS)
def test_what_a_check_writes_for_itself_is_not_a_mutation(real: RealWorld, kind: str) -> None:
    real.create()
    write_output(real.path, kind)
    assert real.inspect().state == "matching"
    assert real.observe().state == "diverged"  # but it is no longer clean enough to reuse for another check


@pytest.mark.parametrize("kind", OUTPUTS)
def test_a_check_that_changes_a_tracked_file_is_caught_beside_its_own_output(real: RealWorld, kind: str) -> None:
    real.create()
    write_output(real.path, kind)
    (real.path / "src" / "app.py").write_text("print('bye')\n")
    inspected = real.inspect()
    assert inspected.state == "mutated" and "src/app.py" in inspected.detail


@pytest.mark.parametrize("kind", MUTATIONS)
def test_each_kind_of_mutation_is_detected(real: RealWorld, kind: str) -> None:
    real.create()
    mutate(real, kind)
    inspected = real.inspect()
    assert inspected.state == "mutated", inspected
    assert inspected.detail
    assert real.observe().state != "ready"


def test_ignored_output_and_the_artifact_folder_do_not_count(real: RealWorld) -> None:
    real.create()
    (real.path / "src" / "app.pyc").write_bytes(b"\0")
    (real.path / "build").mkdir()
    (real.path / "build" / "x.o").write_bytes(b"\0")
    (real.path / ARTIFACTS / "deep" / "er").mkdir(parents=True)
    (real.path / ARTIFACTS / "deep" / "er" / "report.txt").write_text("ok\n")
    assert real.inspect().state == "matching"


def test_a_missing_execution_or_a_folder_without_worktree_is_missing(real: RealWorld) -> None:
    assert real.inspect().state == "missing"
    real.path.mkdir(parents=True)
    assert real.inspect().state == "missing"


def test_removal_is_refused_while_a_real_check_group_is_alive_then_allowed(real: RealWorld) -> None:
    real.create()
    processes = PsutilProcesses()
    sleeper = subprocess.Popen(["sleep", "60"], cwd=real.path, start_new_session=True)
    try:
        identity = processes.identity(sleeper.pid)
        assert identity is not None
        assert processes.group_liveness(identity) == "alive"
        with pytest.raises(Refused) as caught:
            real.remove(group_alive=processes.group_liveness(identity) != "dead")
        assert caught.value.code == "execution-busy"
        assert real.observe().state == "ready"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert processes.group_liveness(identity) == "dead"
    real.remove(group_alive=processes.group_liveness(identity) != "dead")
    assert real.observe().state == "absent"
    assert str(real.path) not in worktrees(real.checkout)
    fsck(real.checkout)


def test_removal_never_reaches_through_a_symlink_planted_at_the_path(real: RealWorld, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    real.path.parent.mkdir(parents=True)
    os.symlink(outside, real.path)
    real.remove()
    assert (outside / "keep.txt").read_text() == "mine\n"
    assert not real.path.is_symlink()


def test_a_removal_killed_half_way_leaves_remnants_that_the_next_removal_clears(real) -> None:
    # the removal sets the folder aside, then deletes it, then the admin entry: killed after the first step, the
    # path is empty but git still lists the worktree, and the folder set aside is still there. Found by the
    # random-kill campaign of docket go: the removal was recorded as observed, and reconcile found the entry unowned.
    real.create()
    aside = real.path.parent / f".{real.path.name}.dead.removing"
    os.rename(real.path, aside)
    assert real.observe().state == "absent"  # nothing at the path: a new execution could be made there
    assert real.port.execution_remnants(real.common, real.path)
    real.remove()
    assert not real.port.execution_remnants(real.common, real.path)
    assert not aside.exists() and str(real.path) not in worktrees(real.checkout)
    fsck(real.checkout)


def test_no_remnants_of_an_execution_never_made_or_wholly_removed(world) -> None:
    assert not world.port.execution_remnants(world.common, world.path)
    world.create()
    world.remove()
    assert not world.port.execution_remnants(world.common, world.path)
