"""Task workspaces (repositories of their own, borrowing the user's objects): observe and create against real git
(the same cases against FakeWorkspaces), and [worktree] include."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fakes.workspaces import FakeWorkspaces
from docket.adapters.world.workspaces.port import DulwichWorkspaces
from docket.adapters.world.files.paths import main_worktree, task_branch, task_worktree_path
from docket.domain.kernel.errors import BadInput
from tests.conftest import git
from tests.integration.port_worlds import FakeMainWorld, world_fixture

RUN, TASK = "run-7k2m9x4q", "task-1"
BRANCH = task_branch(RUN, TASK)


class RealWorld:
    """A real repository (made with the git CLI) seen through DulwichWorkspaces."""

    def __init__(self, repo: Path):
        self.checkout = repo
        self.common = repo / ".git"
        self.port = DulwichWorkspaces()
        self.base = git(repo, "rev-parse", "HEAD")
        self.path = task_worktree_path(self.common, RUN, TASK)

    def observe(self, branch: str = BRANCH):
        return self.port.observe_worktree(self.common, self.path, branch, self.base)

    def create(self, branch: str = BRANCH) -> None:
        self.port.create_worktree(self.common, self.path, branch, self.base)

    def branch_at_base(self, name: str = BRANCH) -> None:
        git(self.checkout, "branch", name, self.base)

    def branch_elsewhere(self) -> None:
        git(self.checkout, "commit", "-q", "--allow-empty", "-m", "later")
        git(self.checkout, "branch", BRANCH, "HEAD")
        git(self.checkout, "reset", "-q", "--hard", self.base)

    def file_at_path(self) -> None:
        self.path.parent.mkdir(parents=True)
        self.path.write_text("not a worktree\n")

    def dir_at_path(self) -> None:
        self.path.mkdir(parents=True)
        (self.path / "notes.txt").write_text("someone's folder\n")

    def worktree_on_other_branch(self) -> None:
        self.create()
        git(self.path, "checkout", "-q", "-b", "other")

    def branch_deleted(self) -> None:
        git(self.path, "checkout", "-q", "--detach")
        git(self.path, "update-ref", "-d", f"refs/heads/{BRANCH}")
        git(self.path, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")

    def agent_commits(self) -> str:
        (self.path / "work.txt").write_text("done\n")
        git(self.path, "add", "work.txt")
        git(self.path, "commit", "-q", "-m", "agent work")
        return git(self.path, "rev-parse", "HEAD")


class FakeWorld(FakeMainWorld):
    """The same cases as plain values in FakeWorkspaces."""

    def __init__(self, tmp_path: Path):
        super().__init__(tmp_path)
        self.port = FakeWorkspaces({self.common: self.repository})
        self.path = task_worktree_path(self.common, RUN, TASK)

    def observe(self, branch: str = BRANCH):
        return self.port.observe_worktree(self.common, self.path, branch, self.base)

    def create(self, branch: str = BRANCH) -> None:
        self.port.create_worktree(self.common, self.path, branch, self.base)

    def branch_at_base(self, name: str = BRANCH) -> None:
        self.repository.branches[name] = self.base

    def branch_elsewhere(self) -> None:
        self.repository.point(BRANCH)

    def file_at_path(self) -> None:
        self.port.occupied[self.path] = "a file, not a worktree"

    def dir_at_path(self) -> None:
        self.port.occupied[self.path] = "a directory that is not a git workspace"

    def worktree_on_other_branch(self) -> None:
        self.repository.branches["other"] = self.base
        self.repository.worktrees[self.path] = "other"

    def branch_deleted(self) -> None:
        del self.repository.branches[BRANCH]

    def agent_commits(self) -> str:
        return self.repository.point(BRANCH)


world = world_fixture(FakeWorld, RealWorld)


def test_absent_then_created_is_present_at_base(world) -> None:
    assert world.observe().state == "absent"
    world.create()
    observed = world.observe()
    assert (observed.state, observed.head) == ("present", world.base)


def test_creating_twice_changes_nothing(world) -> None:
    world.create()
    world.create()
    assert world.observe().state == "present"


def test_a_branch_of_that_name_in_the_users_repository_is_none_of_the_workspaces_business(repo: Path) -> None:
    world = RealWorld(repo)
    world.branch_elsewhere()  # the user's own refs/heads/docket/... somewhere else: the workspace has its own
    assert world.observe().state == "absent"
    world.create()
    observed = world.observe()
    assert (observed.state, observed.head) == ("present", world.base)


def test_an_agent_commit_keeps_it_present_with_the_new_head(world) -> None:
    world.create()
    head = world.agent_commits()
    observed = world.observe()
    assert (observed.state, observed.head) == ("present", head)
    assert head != world.base


@pytest.mark.parametrize(("arrange", "named"), [
    ("file_at_path", "a file"),
    ("dir_at_path", "not a git workspace"),
    ("worktree_on_other_branch", "on branch other"),
])
def test_anything_else_is_diverged_and_create_leaves_it_alone(world, arrange: str, named: str) -> None:
    getattr(world, arrange)()
    observed = world.observe()
    assert observed.state == "diverged"
    assert named in observed.detail
    world.create()
    assert world.observe() == observed


def test_a_worktree_whose_branch_was_deleted_is_diverged(world) -> None:
    world.create()
    world.branch_deleted()
    observed = world.observe()
    assert observed.state == "diverged" and "missing" in observed.detail


# Real git only: what git itself says, and hostile file systems.


def test_git_sees_a_clean_workspace_of_its_own_on_its_branch(repo: Path) -> None:
    world = RealWorld(repo)
    world.create()
    assert git(world.path, "status", "--porcelain") == ""
    assert git(world.path, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert (world.path / "README.md").read_text() == "hello\n"
    assert Path(git(world.path, "rev-parse", "--absolute-git-dir")) == world.path / ".git"
    assert (world.path / ".git" / "objects" / "info" / "alternates").read_text() == f"{world.common / 'objects'}\n"
    assert list((world.path / ".git" / "hooks").iterdir()) == []
    assert "remote" not in (world.path / ".git" / "config").read_text()
    git(world.path, "fsck", "--strict")
    assert git(repo, "worktree", "list").count("\n") == 0  # no linked worktree: the user's .git is not touched
    assert f"refs/heads/{BRANCH}" not in git(repo, "for-each-ref")
    assert os.stat(world.path).st_mode & 0o777 == 0o700
    assert os.stat(world.path.parent).st_mode & 0o777 == 0o700


def test_the_workspace_lives_in_the_data_folder_under_the_repository_key(repo: Path, data_dir: Path) -> None:
    world = RealWorld(repo)
    assert world.path.relative_to(data_dir).parts[0] == "workspaces"
    assert world.path.relative_to(data_dir).parts[2:] == (RUN, TASK)


def test_two_runs_with_the_same_task_id_get_their_own_workspaces(repo: Path) -> None:
    first, second = RealWorld(repo), RealWorld(repo)
    second.path = task_worktree_path(second.common, "run-other", TASK)
    first.create()
    second.port.create_worktree(second.common, second.path, task_branch("run-other", TASK), second.base)
    assert first.observe().state == "present"
    assert second.observe(task_branch("run-other", TASK)).state == "present"


def test_an_interrupted_creation_is_absent_and_completed(repo: Path) -> None:
    world = RealWorld(repo)
    world.path.parent.mkdir(parents=True)
    (world.path.parent / f".{TASK}.0000.partial" / ".git").mkdir(parents=True)  # what a kill before the rename leaves
    assert world.observe().state == "absent"
    world.create()
    assert world.observe().state == "present"
    assert [p.name for p in world.path.parent.iterdir()] == [TASK]
    git(world.path, "fsck", "--strict")


def test_a_symlink_at_the_path_is_diverged_and_never_followed(repo: Path, tmp_path: Path) -> None:
    world = RealWorld(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    world.path.parent.mkdir(parents=True)
    world.path.symlink_to(elsewhere)
    observed = world.observe()
    assert observed.state == "diverged" and "symlink" in observed.detail
    world.create()
    assert list(elsewhere.iterdir()) == []


def test_a_symlinked_parent_is_not_followed_into(repo: Path, tmp_path: Path) -> None:
    world = RealWorld(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    world.path.parent.parent.mkdir(parents=True)
    world.path.parent.symlink_to(elsewhere)
    observed = world.observe()
    assert observed.state == "diverged" and "parent" in observed.detail
    world.create()
    assert list(elsewhere.iterdir()) == []


def test_a_workspace_of_another_repository_is_diverged(repo: Path, tmp_path: Path) -> None:
    world = RealWorld(repo)
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "x")
    world.path.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", "--shared", str(other), str(world.path))
    observed = world.observe()
    assert observed.state == "diverged" and "another repository" in observed.detail


def test_a_linked_worktree_at_the_path_is_diverged(repo: Path) -> None:
    world = RealWorld(repo)
    world.path.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", BRANCH, str(world.path), world.base)
    observed = world.observe()
    assert observed.state == "diverged" and "linked worktree" in observed.detail


def test_a_detached_workspace_is_diverged(repo: Path) -> None:
    world = RealWorld(repo)
    world.create()
    git(world.path, "checkout", "-q", "--detach")
    observed = world.observe()
    assert observed.state == "diverged" and "detached" in observed.detail


def test_an_unreadable_repository(tmp_path: Path) -> None:
    observed = DulwichWorkspaces().observe_worktree(tmp_path / "nothing", tmp_path / "wt", BRANCH, "0" * 40)
    assert observed.state == "unreadable"


def test_the_main_checkout_of_a_common_dir(repo: Path, tmp_path: Path) -> None:
    assert main_worktree(repo / ".git") == repo
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "bare.git")], check=True)
    assert main_worktree(tmp_path / "bare.git") is None


# [worktree] include


@pytest.fixture
def checkout_and_worktree(repo: Path) -> tuple[Path, Path]:
    world = RealWorld(repo)
    world.create()
    return repo, world.path


def test_ignored_files_are_copied_and_copying_again_changes_nothing(checkout_and_worktree, tmp_path: Path) -> None:
    source, worktree = checkout_and_worktree
    (source / ".env").write_text("SECRET=1\n")
    (source / "config").mkdir()
    (source / "config" / "db.local").write_text("db\n")
    (source / "config" / "app.toml").write_text("tracked-ish\n")
    assert DulwichWorkspaces().copy_includes(source, worktree, [".env", "config/*.local"]) == [".env",
                                                                                              "config/db.local"]
    assert (worktree / ".env").read_text() == "SECRET=1\n"
    assert not (worktree / "config" / "app.toml").exists()
    assert DulwichWorkspaces().copy_includes(source, worktree, [".env", "config/*.local"]) == [".env",
                                                                                              "config/db.local"]


def test_a_symlink_out_of_the_checkout_is_not_followed(checkout_and_worktree, tmp_path: Path) -> None:
    source, worktree = checkout_and_worktree
    (tmp_path / "secret").write_text("outside\n")
    (source / ".env").symlink_to(tmp_path / "secret")
    (source / ".inner").symlink_to("README.md")
    skipped: list[str] = []
    assert DulwichWorkspaces().copy_includes(source, worktree, [".env", ".inner"],
                                             skipped=skipped) == [".inner"]
    assert not os.path.lexists(worktree / ".env")
    assert os.readlink(worktree / ".inner") == "README.md"
    assert skipped and skipped[0].startswith(".env: a symlink")


def test_a_symlinked_folder_in_the_checkout_is_not_entered(checkout_and_worktree, tmp_path: Path) -> None:
    source, worktree = checkout_and_worktree
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.local").write_text("x\n")
    (source / "config").symlink_to(tmp_path / "outside")
    assert DulwichWorkspaces().copy_includes(source, worktree, ["config/*.local"]) == []


def test_an_existing_different_file_is_left_alone(checkout_and_worktree) -> None:
    source, worktree = checkout_and_worktree
    (source / ".env").write_text("new\n")
    (worktree / ".env").write_text("the agent's own\n")
    skipped: list[str] = []
    assert DulwichWorkspaces().copy_includes(source, worktree, [".env"], skipped=skipped) == []
    assert (worktree / ".env").read_text() == "the agent's own\n"
    assert skipped == [".env: a different file is already in the worktree (left alone)"]


def test_a_symlinked_folder_in_the_worktree_is_not_written_through(checkout_and_worktree, tmp_path: Path) -> None:
    source, worktree = checkout_and_worktree
    (source / "config").mkdir()
    (source / "config" / "a.local").write_text("x\n")
    (tmp_path / "target").mkdir()
    (worktree / "config").symlink_to(tmp_path / "target")
    assert DulwichWorkspaces().copy_includes(source, worktree, ["config/*.local"]) == []
    assert list((tmp_path / "target").iterdir()) == []


@pytest.mark.parametrize("pattern", ["../.env", "/etc/passwd", "a/../../b", "", "a\x00b", "./x"])
@pytest.mark.parametrize("port", [DulwichWorkspaces(), FakeWorkspaces()], ids=["dulwich", "fake"])
def test_a_pattern_leaving_the_root_is_refused(port, pattern: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput) as refused:
        port.copy_includes(tmp_path, tmp_path / "wt", [".env", pattern])
    assert refused.value.code == "bad-include"


@pytest.mark.parametrize(("run", "task"), [("run-1", "a/b"), ("", "t"), ("run-1", "t.lock"), ("run..1", "t"),
                                           ("run 1", "t"), ("run-1", "t\x1b")])
def test_ids_that_are_no_branch_part_are_refused(run: str, task: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput) as refused:
        task_worktree_path(tmp_path, run, task)
    assert refused.value.code == "bad-branch-name"
