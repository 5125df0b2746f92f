"""Docket's refs, workspaces and executions listed, and removed by compare-and-swap, against real git (the story
also against the fakes); real git must agree (`git for-each-ref`, `git rev-parse` in each workspace, `git fsck
--strict`), and the user's repository never gets a linked worktree."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.git.capture import Capture, DulwichCapture, Unstable
from docket.adapters.world.workspaces.executions import execution_path
from tests.fakes.ports import FakeGitPorts
from docket.adapters.world.git.inventory import DulwichInventory
from docket.adapters.world.workspaces.port import DulwichWorkspaces
from docket.adapters.world.files.paths import task_branch, task_worktree_path
from docket.domain.kernel.errors import BadInput, Conflict, Refused
from tests.conftest import git
from tests.integration.port_worlds import FakeMainWorld, world_fixture

RUN, TASK, BINDING = "run-7k2m9x4q", "task-1", "0123456789abcdef" * 4
BRANCH = task_branch(RUN, TASK)
CANDIDATE_REF = f"refs/docket/candidates/{RUN}/{BINDING}"


def fsck(repo: Path) -> None:
    result = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def porcelain(repo: Path) -> dict[str, dict[str, str]]:
    """`git worktree list --porcelain` as path -> {"HEAD": ..., "branch": ..., "detached": "", "prunable": ...}."""
    found = {}
    for block in git(repo, "worktree", "list", "--porcelain").split("\n\n"):
        lines = block.splitlines()
        found[lines[0].removeprefix("worktree ")] = dict((line.split(" ", 1) + [""])[:2] for line in lines[1:])
    return found


def prunable(repo: Path) -> str:
    """What `git worktree prune -n -v` would prune (it says so on stderr)."""
    result = subprocess.run(["git", "worktree", "prune", "-n", "-v"], cwd=repo, capture_output=True, text=True,
                            check=True)
    return result.stdout + result.stderr


def for_each_ref(repo: Path) -> list[tuple[str, str]]:
    listed = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/docket/")
    return [tuple(line.split(" ")) for line in listed.splitlines()]


class RealWorld:
    """A real repository seen through DulwichInventory (made with DulwichWorkspaces, captured with DulwichCapture)."""

    def __init__(self, repo: Path):
        self.checkout, self.common, self.port = repo, repo / ".git", DulwichInventory()
        self.workspaces, self.capture = DulwichWorkspaces(), DulwichCapture()
        self.base = git(repo, "rev-parse", "HEAD")
        self.task = task_worktree_path(self.common, RUN, TASK)
        self.execution = execution_path(self.common, RUN, BINDING, "tests", 1)

    def make_task(self) -> None:
        self.workspaces.create_worktree(self.common, self.task, BRANCH, self.base)

    def make_execution(self) -> None:
        self.workspaces.create_execution(self.common, self.execution, self.base)

    def add_ref(self, ref: str, oid: str) -> None:
        git(self.checkout, "update-ref", ref, oid)

    def branch_exists(self) -> bool:
        """The task's branch, which lives in its workspace (never in the user's repository)."""
        assert not git(self.checkout, "branch", "--list", BRANCH)
        return (self.task / ".git" / "refs" / "heads" / BRANCH).is_file()

    def refs(self) -> dict[str, str]:
        return dict(for_each_ref(self.checkout))

    def check_out_elsewhere(self, path: Path) -> None:
        git(self.checkout, "worktree", "add", "-q", str(path), BRANCH)

    def interrupt_removal(self) -> None:
        os.rename(self.task, self.task.parent / ".task-1.0badc0de.removing")  # a removal's first step, then a crash

    def agent_commits(self) -> str:
        (self.task / "work.txt").write_text("done\n")
        git(self.task, "add", "work.txt")
        git(self.task, "commit", "-q", "-m", "agent work")
        return git(self.task, "rev-parse", "HEAD")


class FakeWorld(FakeMainWorld):
    """The same story as plain values in the fakes (FakeInventory, FakeWorkspaces, FakeCapture over one world)."""

    def __init__(self, tmp_path: Path):
        super().__init__(tmp_path)
        fakes = FakeGitPorts({self.common: self.repository})
        self.port, self.workspaces, self.capture = fakes.inventory, fakes.workspaces, fakes.capture
        self.task = task_worktree_path(self.common, RUN, TASK)
        self.execution = execution_path(self.common, RUN, BINDING, "tests", 1)

    make_task, make_execution = RealWorld.make_task, RealWorld.make_execution

    def add_ref(self, ref: str, oid: str) -> None:
        self.repository.refs[ref] = oid

    def branch_exists(self) -> bool:
        return BRANCH in self.repository.branches

    def refs(self) -> dict[str, str]:
        return {r: o for r, o in self.repository.refs.items() if r.startswith("refs/docket/")}

    def check_out_elsewhere(self, path: Path) -> None:
        self.repository.worktrees[path] = BRANCH

    def interrupt_removal(self) -> None:
        self.repository.stale[self.task] = self.repository.worktrees.pop(self.task)

    def agent_commits(self) -> str:
        return self.repository.point(BRANCH)


world = world_fixture(FakeWorld, RealWorld)


@pytest.fixture
def real(repo: Path) -> RealWorld:
    return RealWorld(repo)


def listed(world) -> list[tuple]:  # noqa: ANN001
    return [(Path(w.path), w.kind, w.exists, w.registered, w.branch, w.head, bool(w.admin), bool(w.detail))
            for w in world.port.list_docket_worktrees(world.common)]


# The story, against both -----------------------------------------------------------------------------------------


def test_the_story_of_a_task_an_execution_and_a_ref(world) -> None:
    port, common = world.port, world.common
    assert port.list_docket_worktrees(common) == [] and port.list_docket_refs(common) == []
    world.make_task()
    world.make_execution()
    world.add_ref(CANDIDATE_REF, world.base)
    assert port.list_docket_refs(common) == [(CANDIDATE_REF, world.base)]
    assert listed(world) == [
        (world.execution, "execution", True, True, None, world.base, True, False),
        (world.task, "task", True, True, BRANCH, world.base, True, False),
    ]
    assert port.observe_head(common, world.task) == (world.base, BRANCH)
    assert port.owns_branch(common, world.task) == BRANCH
    assert port.owns_branch(common, world.execution) is None

    port.remove_worktree(common, world.execution, expected_head=world.base, branch=None)
    head = world.agent_commits()
    port.remove_worktree(common, world.task, expected_head=world.base, branch=BRANCH)  # HEAD moved: left alone
    assert [Path(w.path) for w in port.list_docket_worktrees(common)] == [world.task] and world.branch_exists()
    with pytest.raises(Refused) as busy:
        port.remove_worktree(common, world.task, expected_head=head, branch=BRANCH, group_alive=True)
    assert busy.value.code == "worktree-busy"
    port.remove_worktree(common, world.task, expected_head=head, branch=BRANCH)
    assert port.list_docket_worktrees(common) == [] and not world.branch_exists()
    assert port.observe_head(common, world.task) == (None, None)

    port.delete_ref(common, CANDIDATE_REF, head)  # names the base, not head: left alone
    assert world.refs() == {CANDIDATE_REF: world.base}
    port.delete_ref(common, CANDIDATE_REF, world.base)
    assert world.refs() == {} and port.list_docket_refs(common) == []
    port.delete_ref(common, CANDIDATE_REF, world.base)  # absent: deleted already


def test_an_interrupted_removal_is_finished_by_replay(real: RealWorld) -> None:
    real.make_task()
    real.interrupt_removal()
    assert real.port.list_docket_worktrees(real.common) == []  # gone from its path: the rest is cleanup
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=BRANCH)
    assert list(real.task.parent.iterdir()) == []


@pytest.mark.parametrize("path", ["outside", "task-folder-parent", "dotted", "dotdot"])
def test_a_path_that_is_no_worktree_place_is_refused(world, path: str) -> None:
    bad = {"outside": world.common.parent / "elsewhere",
           "task-folder-parent": world.task.parent,
           "dotted": world.task.parent / ".task-1.abcd.partial",
           "dotdot": world.task.parent / ".." / "x" / "y"}[path]
    with pytest.raises(BadInput) as refused:
        world.port.remove_worktree(world.common, bad, expected_head=None, branch=None)
    assert refused.value.code == "bad-worktree-path"


@pytest.mark.parametrize("ref", ["refs/heads/main", "refs/docket", "refs/docket/a..b", "refs/docket/x.lock",
                                 "refs/docketx/a"])
def test_delete_ref_refuses_refs_that_are_not_docket_s(world, ref: str) -> None:
    with pytest.raises(BadInput) as refused:
        world.port.delete_ref(world.common, ref, world.base)
    assert refused.value.code == "bad-ref"


def test_a_worktree_on_another_branch_than_named_is_left_alone(world) -> None:
    world.make_task()
    world.port.remove_worktree(world.common, world.task, expected_head=world.base, branch="main")
    assert world.port.owns_branch(world.common, world.task) == BRANCH
    world.port.remove_worktree(world.common, world.task, expected_head=world.base, branch=BRANCH)
    assert world.port.list_docket_worktrees(world.common) == [] and not world.branch_exists()


def test_fake_capture_twice_returns_what_the_test_set(tmp_path: Path) -> None:
    fake = FakeWorld(tmp_path)
    with pytest.raises(Refused) as unreadable:
        fake.capture.capture_twice(fake.task, expected_head=None, base=fake.base, artifact_dir=None)
    assert unreadable.value.code == "worktree-unreadable"
    made = Capture(fake.base, "a" * 40, ("x",))
    fake.capture.captures[fake.task] = made
    assert fake.capture.capture_twice(fake.task, expected_head=fake.base, base=fake.base, artifact_dir="out") == made
    with pytest.raises(Conflict):
        fake.capture.capture_twice(fake.task, expected_head="b" * 40, base=fake.base, artifact_dir=None)
    unstable = Unstable(made, Capture(fake.base, "c" * 40, ("x",)), ("x",))
    fake.capture.captures[fake.task] = unstable
    assert fake.capture.capture_twice(fake.task, expected_head=None, base=fake.base, artifact_dir=None) == unstable


# Real git agrees -------------------------------------------------------------------------------------------------


def test_refs_agree_with_for_each_ref_loose_packed_and_broken(real: RealWorld) -> None:
    other = git(real.checkout, "commit-tree", "-m", "other", f"{real.base}^{{tree}}")
    real.add_ref(f"refs/docket/candidates/{RUN}/a", real.base)
    real.add_ref("refs/docket/integrations/r1", other)
    git(real.checkout, "pack-refs", "--all")
    real.add_ref(f"refs/docket/candidates/{RUN}/b", other)
    real.add_ref("refs/docket/integrations/r1", real.base)  # loose over packed
    refs = real.common / "refs" / "docket"
    (refs / "stray.lock").write_text(real.base + "\n")  # git's lock file, no ref
    (refs / "garbage").write_text("not an object id\n")
    (refs / "dangling").write_text("ref: refs/heads/missing\n")
    real.add_ref("refs/heads/kept", real.base)  # not docket's
    found = real.port.list_docket_refs(real.common)
    assert found == for_each_ref(real.checkout)
    assert [r for r, _ in found] == [f"refs/docket/candidates/{RUN}/a", f"refs/docket/candidates/{RUN}/b",
                                     "refs/docket/integrations/r1"]


def test_an_unreadable_repository_lists_nothing(tmp_path: Path) -> None:
    port = DulwichInventory()
    assert port.list_docket_refs(tmp_path / "nothing") == []
    assert port.list_docket_worktrees(tmp_path / "nothing") == []
    assert port.observe_head(tmp_path / "nothing", tmp_path / "nothing" / "x") == (None, None)
    assert port.branch_tip(tmp_path / "nothing", "main") is None


def test_workspaces_are_listed_as_git_sees_them(real: RealWorld, tmp_path: Path) -> None:
    real.make_task()
    real.make_execution()
    plain = task_worktree_path(real.common, "run-other", "notes")
    plain.mkdir(parents=True)
    (plain / "notes.txt").write_text("someone's folder\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = execution_path(real.common, RUN, BINDING, "lint", 1)
    os.symlink(outside, planted)
    (real.task.parent / ".task-9.abcd.partial").mkdir()  # a staging leftover: not listed
    git(real.checkout, "worktree", "add", "-q", "-b", "mine", str(tmp_path / "mine"))  # not docket's

    found = {Path(w.path): w for w in real.port.list_docket_worktrees(real.common)}
    assert sorted(found) == sorted([real.task, real.execution, plain, planted])
    for path in (real.task, real.execution):
        assert found[path].registered and found[path].head == git(path, "rev-parse", "HEAD")
    assert found[real.task].branch == git(real.task, "symbolic-ref", "--short", "HEAD") == BRANCH
    assert found[real.execution].branch is None
    assert found[planted].exists and "symlink" in found[planted].detail and not found[planted].registered
    assert found[plain].exists and not found[plain].registered and found[plain].head is None
    assert list(porcelain(real.checkout)) == [str(real.checkout), str(tmp_path / "mine")]


def test_a_symlink_where_a_run_folder_should_be_is_listed_not_entered(real: RealWorld, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "task-x").mkdir(parents=True)
    real.task.parent.parent.mkdir(parents=True)
    os.symlink(outside, real.task.parent.parent / "run-planted")
    [entry] = real.port.list_docket_worktrees(real.common)
    assert entry.path == str(real.task.parent.parent / "run-planted")
    assert entry.exists and not entry.registered and "symlink" in entry.detail


def test_removing_a_task_worktree_leaves_nothing_for_git_to_prune(real: RealWorld) -> None:
    real.make_task()
    (real.task / "untracked.txt").write_text("pinned elsewhere, says the caller\n")
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=BRANCH)
    assert not real.task.exists() and not real.branch_exists()
    assert list(real.task.parent.iterdir()) == []
    assert list(porcelain(real.checkout)) == [str(real.checkout)]
    fsck(real.checkout)


def test_removing_an_execution_through_remove_worktree(real: RealWorld) -> None:
    real.make_execution()
    real.port.remove_worktree(real.common, real.execution, expected_head="0" * 40, branch=None)
    assert real.execution.is_dir()  # another HEAD expected: left alone
    real.port.remove_worktree(real.common, real.execution, expected_head=real.base, branch=None)
    assert not real.execution.exists() and list(porcelain(real.checkout)) == [str(real.checkout)]
    fsck(real.checkout)


def test_a_moved_branch_is_left_alone_and_the_workspace_too(real: RealWorld) -> None:
    real.make_task()
    head = real.agent_commits()
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=BRANCH)
    assert real.task.is_dir() and real.port.observe_head(real.common, real.task) == (head, BRANCH)


def test_a_symlink_at_the_path_is_left_alone_and_its_target_untouched(real: RealWorld, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("mine\n")
    real.task.parent.mkdir(parents=True)
    os.symlink(target, real.task)
    for expected in (None, real.base):
        real.port.remove_worktree(real.common, real.task, expected_head=expected, branch=None)
    assert real.task.is_symlink() and (target / "keep.txt").read_text() == "mine\n"


def test_a_symlinked_parent_is_not_removed_through(real: RealWorld, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / TASK).mkdir(parents=True)
    (elsewhere / TASK / "keep.txt").write_text("mine\n")
    real.task.parent.parent.mkdir(parents=True)
    os.symlink(elsewhere, real.task.parent)
    real.port.remove_worktree(real.common, real.task, expected_head=None, branch=None)
    assert (elsewhere / TASK / "keep.txt").read_text() == "mine\n"


def test_an_unregistered_folder_goes_only_when_no_head_is_expected(real: RealWorld) -> None:
    real.task.mkdir(parents=True)
    (real.task / "notes.txt").write_text("left by a crash\n")
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=None)
    real.port.remove_worktree(real.common, real.task, expected_head=None, branch=BRANCH)
    assert (real.task / "notes.txt").exists()
    real.port.remove_worktree(real.common, real.task, expected_head=None, branch=None)
    assert not real.task.exists()


def test_a_worktree_on_another_branch_is_left_alone(real: RealWorld) -> None:
    real.make_task()
    git(real.task, "checkout", "-q", "-b", "elsewhere")
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=BRANCH)
    assert real.task.is_dir() and real.branch_exists()
    assert real.port.owns_branch(real.common, real.task) == "elsewhere"


@pytest.mark.parametrize("crash", ["after-rename", "after-folder"])
def test_replay_after_a_crash_finishes_the_removal(real: RealWorld, crash: str) -> None:
    real.make_task()
    aside = real.task.parent / ".task-1.0badc0de.removing"
    os.rename(real.task, aside)  # the first step of a removal
    if crash == "after-folder":
        shutil.rmtree(aside)
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=BRANCH)
    assert not aside.exists() and not real.task.exists()
    assert real.port.list_docket_worktrees(real.common) == []
    fsck(real.checkout)


def test_a_packed_ref_is_deleted_by_compare_and_swap(real: RealWorld) -> None:
    real.add_ref(CANDIDATE_REF, real.base)
    git(real.checkout, "pack-refs", "--all")
    real.port.delete_ref(real.common, CANDIDATE_REF, "0" * 40)
    assert for_each_ref(real.checkout) == [(CANDIDATE_REF, real.base)]
    real.port.delete_ref(real.common, CANDIDATE_REF, real.base)
    assert for_each_ref(real.checkout) == []
    fsck(real.checkout)


def test_capture_twice_through_the_port(real: RealWorld) -> None:
    real.make_task()
    (real.task / "new.txt").write_text("new\n")
    made = real.capture.capture_twice(real.task, expected_head=real.base, base=real.base, artifact_dir=None)
    assert isinstance(made, Capture) and made.head == real.base and made.changed == ("new.txt",)



@pytest.mark.parametrize("planted", ["file", "fifo"])
def test_a_git_folder_replaced_by_something_else_is_no_workspace(real: RealWorld, planted: str) -> None:
    real.make_task()
    shutil.rmtree(real.task / ".git")
    if planted == "file":
        (real.task / ".git").write_text("gitdir: /somewhere/else\n")
    else:
        os.mkfifo(real.task / ".git")  # opening it to read must not wait for a writer
    [entry] = real.port.list_docket_worktrees(real.common)
    assert (entry.exists, entry.registered, entry.head, entry.admin) == (True, False, None, None)
    assert "not a workspace" in entry.detail
    assert real.port.observe_head(real.common, real.task) == (None, None)
    real.port.remove_worktree(real.common, real.task, expected_head=real.base, branch=BRANCH)
    assert (real.task / ".git").exists()
