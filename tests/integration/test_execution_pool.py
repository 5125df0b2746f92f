"""Executions reused from the repository's pool (execution_pool.py), against real git and real processes: a folder
given back is the next execution's, brought to its commit by writing only what differs, and whatever a check did to
it (files planted, ignored or not, tracked files written, chmod-ed, hard-linked, deleted, a folder swapped for a
symlink, its .git rewritten) is gone before the next check sees it; SIGKILL at each named step and at random
moments, then the next creation, converges."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docket.adapters.world.workspaces.execution_pool import POOL, idle_only, records_of
from docket.adapters.world.workspaces.executions import (create_execution, execution_path, inspect_execution,
                                              observe_execution, remove_execution)
from docket.adapters.world.files.paths import executions_root
from tests.conftest import git

RUN, BINDING = "run-pool", "0123456789abcdef" * 4
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(repo: Path) -> "World":
    return World(repo)


class World:
    """A repository with three commits: A (src/, run.sh, a symlink, .gitignore), B (one file changed, one added in a
    new folder, one deleted, run.sh no longer executable), C (a folder replaced by a file)."""

    def __init__(self, repo: Path) -> None:
        self.checkout, self.common = repo, repo / ".git"
        (repo / "src" / "deep").mkdir(parents=True)
        (repo / "src" / "app.py").write_text("print('a')\n")
        (repo / "src" / "deep" / "x.py").write_text("x = 1\n")
        (repo / "gone.txt").write_text("deleted in B\n")
        (repo / "run.sh").write_text("#!/bin/sh\necho run\n")
        (repo / "run.sh").chmod(0o755)
        os.symlink("README.md", repo / "link")
        (repo / ".gitignore").write_text("*.pyc\nbuild/\n")
        self.a = self.commit("A")
        (repo / "src" / "app.py").write_text("print('b')\n")
        (repo / "new" / "folder").mkdir(parents=True)
        (repo / "new" / "folder" / "n.txt").write_text("added in B\n")
        (repo / "gone.txt").unlink()
        (repo / "run.sh").chmod(0o644)
        self.b = self.commit("B")
        subprocess.run(["rm", "-r", str(repo / "src" / "deep")], check=True)
        (repo / "src" / "deep").write_text("a file where a folder was\n")
        self.c = self.commit("C")
        self.count = 0

    def commit(self, message: str) -> str:
        git(self.checkout, "add", "-A")
        git(self.checkout, "commit", "-q", "-m", message)
        return git(self.checkout, "rev-parse", "HEAD")

    def path(self) -> Path:
        self.count += 1
        return execution_path(self.common, RUN, BINDING, "tests", self.count)

    def create(self, commit: str) -> Path:
        path = self.path()
        create_execution(self.common, path, commit)
        assert observe_execution(self.common, path, commit).state == "ready"
        return path

    def pool(self) -> Path:
        return executions_root(self.common) / POOL


def exactly(path: Path, commit: str) -> None:
    """git agrees that path is commit, nothing untracked, ignored files included, and its index is clean."""
    assert git(path, "rev-parse", "HEAD") == commit
    assert git(path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    assert git(path, "diff", "--stat", commit) == ""
    assert sorted(git(path, "ls-files").splitlines()) == sorted(
        git(path, "ls-tree", "-r", "--name-only", commit).splitlines())


def test_a_given_back_execution_is_the_next_one_brought_to_its_commit(world: World) -> None:
    first = world.create(world.a)
    exactly(first, world.a)
    folder = os.lstat(first).st_ino
    kept = os.lstat(first / "src" / "deep" / "x.py").st_ino  # the same in A and B: not written again
    assert inspect_execution(world.common, first, world.a).state == "matching"
    remove_execution(world.common, first, group_alive=False)
    assert not os.path.lexists(first) and idle_only(world.pool())
    second = world.create(world.b)
    assert os.lstat(second).st_ino == folder and os.lstat(second / "src" / "deep" / "x.py").st_ino == kept
    exactly(second, world.b)
    assert not os.access(second / "run.sh", os.X_OK)
    remove_execution(world.common, second, group_alive=False)
    third = world.create(world.c)  # a folder became a file
    exactly(third, world.c)
    remove_execution(world.common, third, group_alive=False)
    fourth = world.create(world.a)  # and back
    exactly(fourth, world.a)
    assert os.access(fourth / "run.sh", os.X_OK) and os.readlink(fourth / "link") == "README.md"


def _plant(path: Path, how: str) -> None:
    if how == "untracked":
        (path / "src" / "deep" / "planted.py").write_text("fake = True\n")
    elif how == "ignored":
        (path / "src" / "cache.pyc").write_text("fake\n")
        (path / "build").mkdir()
        (path / "build" / "out.txt").write_text("fake\n")
    elif how == "tracked-written":
        (path / "src" / "app.py").write_text("print('faked')\n")
    elif how == "tracked-same-size-time-put-back":
        st = os.stat(path / "src" / "app.py")
        (path / "src" / "app.py").write_text("print('x')\n")  # the same size
        os.utime(path / "src" / "app.py", ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moves
    elif how == "tracked-deleted":
        (path / "src" / "app.py").unlink()
    elif how == "tracked-chmod":
        (path / "src" / "app.py").chmod(0o755)
    elif how == "hard-linked":
        os.link(path / "src" / "app.py", path / "src" / "alias.py")
    elif how == "replaced-by-rename":
        (path / "src" / "other.py").write_text("print('faked')\n")
        os.rename(path / "src" / "other.py", path / "src" / "app.py")
    elif how == "symlink-for-folder":
        os.rename(path / "src" / "deep", path / "moved")
        os.symlink("../moved", path / "src" / "deep")
    elif how == "folder-unreadable":
        (path / "src" / "deep" / "planted.py").write_text("fake = True\n")
        (path / "src" / "deep").chmod(0)
    elif how == "git-hook":
        (path / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch /tmp/owned\n")
        (path / ".git" / "HEAD").write_text("ref: refs/heads/evil\n")
        (path / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")
    elif how == "top-level":
        (path / "planted-at-top").write_text("fake\n")
    else:
        raise AssertionError(how)


ATTACKS = ["untracked", "ignored", "tracked-written", "tracked-same-size-time-put-back", "tracked-deleted",
           "tracked-chmod", "hard-linked", "replaced-by-rename", "symlink-for-folder", "folder-unreadable", "git-hook",
           "top-level"]


@pytest.mark.parametrize("how", ATTACKS)
def test_what_a_check_leaves_is_gone_before_the_next_check(world: World, how: str) -> None:
    first = world.create(world.a)
    _plant(first, how)
    remove_execution(world.common, first, group_alive=False)
    assert not os.path.lexists(first) and idle_only(world.pool())
    for commit in (world.a, world.b):  # the same commit (nothing to bring), and another
        path = world.create(commit)
        exactly(path, commit)
        assert not (path / "src" / "deep").is_symlink()
        remove_execution(world.common, path, group_alive=False)


@pytest.mark.parametrize("how", ["tracked-written", "tracked-same-size-time-put-back", "tracked-deleted",
                                 "tracked-chmod", "replaced-by-rename", "symlink-for-folder"])
def test_a_check_that_changes_tracked_content_inspects_mutated(world: World, how: str) -> None:
    path = world.create(world.a)
    _plant(path, how)
    assert inspect_execution(world.common, path, world.a).state == "mutated"
    assert observe_execution(world.common, path, world.a).state == "diverged"


@pytest.mark.parametrize("how", ["untracked", "ignored", "hard-linked", "top-level"])
def test_a_check_s_own_output_is_no_mutation_but_the_folder_is_no_longer_ready(world: World, how: str) -> None:
    path = world.create(world.a)
    _plant(path, how)
    assert inspect_execution(world.common, path, world.a).state == "matching"
    assert observe_execution(world.common, path, world.a).state == "diverged"


def test_a_file_rewritten_with_its_own_content_is_matching(world: World) -> None:
    path = world.create(world.a)
    (path / "src" / "app.py").write_text("print('a')\n")  # a formatter that changed nothing
    assert inspect_execution(world.common, path, world.a).state == "matching"


def test_records_live_outside_the_execution(world: World) -> None:
    path = world.create(world.a)
    assert records_of(path) is not None
    inside = {p.name for p in path.rglob("*")}
    assert not any(name.endswith(".rec") for name in inside)
    assert all(p.parent == world.pool() for p in world.pool().glob("*.rec"))


# Crashes --------------------------------------------------------------------------------------------------------

SCRIPT = """
import sys
from pathlib import Path
from docket.adapters.world.workspaces.executions import create_execution, remove_execution
common, path, commit, what = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
if what == "create":
    create_execution(common, path, commit)
else:
    remove_execution(common, path, group_alive=False)
"""


def _in_process(world: World, what: str, path: Path, commit: str, fault: str | None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if fault:
        env["DOCKET_FAULT"] = fault
    return subprocess.run([sys.executable, "-c", SCRIPT, str(world.common), str(path), commit, what],
                          env=env, cwd=ROOT, capture_output=True, timeout=120).returncode


@pytest.mark.parametrize("point", ["execution-pool:after-take", "execution-pool:before-place",
                                   "execution-pool:after-place", "execution-pool:after-give-back"])
def test_a_kill_at_each_step_then_the_next_creation_converges(world: World, point: str) -> None:
    warm = world.create(world.a)  # an idle entry for the next one to take
    _plant(warm, "untracked")
    remove_execution(world.common, warm, group_alive=False)
    path = world.path()
    if point == "execution-pool:after-give-back":
        assert _in_process(world, "create", path, world.b, None) == 0
        _plant(path, "tracked-written")
        assert _in_process(world, "remove", path, world.b, point) == -signal.SIGKILL
        assert not os.path.lexists(path)  # the path is free already
    else:
        assert _in_process(world, "create", path, world.b, point) == -signal.SIGKILL
        state = observe_execution(world.common, path, world.b).state
        assert state == ("ready" if point == "execution-pool:after-place" else "absent")
        if state == "absent":
            create_execution(world.common, path, world.b)  # the effector acts again from absent
        exactly(path, world.b)
        remove_execution(world.common, path, group_alive=False)
    for commit in (world.b, world.a):
        again = world.create(commit)
        exactly(again, commit)
        remove_execution(world.common, again, group_alive=False)
    assert idle_only(world.pool())


def test_kills_at_random_moments_never_leave_a_wrong_execution(world: World) -> None:
    rng = random.Random(22)
    loop = SCRIPT.replace('if what == "create":', 'import itertools\nfor i in itertools.count():\n    '
                          'p = path.with_name(f"tests-{1000 + i}")\n    create_execution(common, p, commit if i % 2 '
                          'else sys.argv[5])\n    remove_execution(common, p, group_alive=False)\nif False:')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-c", loop, str(world.common), str(world.path()), world.a, "x",
                                 world.b], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.3, 1.2))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
        for place in sorted(world.path().parent.glob("tests-1*")):  # what the killed process left placed
            remove_execution(world.common, place, group_alive=False)
        for commit in (world.a, world.b):
            path = world.create(commit)
            exactly(path, commit)
            remove_execution(world.common, path, group_alive=False)
        assert idle_only(world.pool())


@pytest.mark.parametrize("name", ["..", ".git", ".GIT"])
def test_a_crafted_tree_brought_from_the_pool_is_refused_and_writes_nothing(world: World, tmp_path: Path,
                                                                           name: str) -> None:
    """The diff of a warm entry to a commit whose tree names '..' or '.git' (git refuses both) is refused whole."""
    from docket.domain.kernel.errors import Refused

    warm = world.create(world.a)
    remove_execution(world.common, warm, group_alive=False)  # the next creation brings this entry, not a checkout

    def run(*args: str, stdin: str) -> str:
        return subprocess.run(["git", *args], cwd=world.checkout, input=stdin, check=True, capture_output=True,
                              text=True).stdout.strip()

    blob = run("hash-object", "-w", "--stdin", stdin="escaped\n")
    evil = run("mktree", stdin=f"100644 blob {blob}\tescaped.txt\n")
    base = git(world.checkout, "rev-parse", f"{world.a}^{{tree}}")
    entries = git(world.checkout, "ls-tree", base)
    crafted = run("mktree", "--missing", stdin=f"{entries}\n040000 tree {evil}\t{name}\n")
    commit = run("commit-tree", crafted, "-m", "crafted", stdin="")
    path = world.path()
    with pytest.raises(Refused) as caught:
        create_execution(world.common, path, commit)
    assert caught.value.code == "execution-unsafe-tree"
    assert not os.path.lexists(path)
    assert not list(executions_root(world.common).parent.parent.rglob("escaped.txt"))  # the whole data folder
    assert idle_only(world.pool())
    again = world.create(world.b)  # the pool still works
    exactly(again, world.b)


def test_the_pool_keeps_a_few_idle_entries_and_removes_the_rest(world: World) -> None:
    from docket.adapters.world.workspaces.execution_pool import KEEP_IDLE

    placed = [world.create(world.a) for _ in range(KEEP_IDLE + 2)]  # as many checks at once
    for path in placed[:2]:  # given back while the others still run: kept (only idle entries count)
        remove_execution(world.common, path, group_alive=False)
    assert len([p for p in world.pool().iterdir() if p.is_dir()]) == 2
    for path in placed[2:]:
        remove_execution(world.common, path, group_alive=False)
    assert idle_only(world.pool())
    assert len(list(world.pool().glob("*.rec"))) == KEEP_IDLE
    again = [world.create(world.b) for _ in range(KEEP_IDLE)]  # all brought, none made afresh
    assert len(list(world.pool().glob("*.rec"))) == KEEP_IDLE
    for path in again:
        exactly(path, world.b)


def test_an_entry_whose_last_tree_is_gone_from_the_store_is_not_used(world: World) -> None:
    """An idle entry holds a tree the store no longer has (a killed integration's merge, pruned since): the next
    execution is made whole, not brought from that tree (`docket integrate` ended at exit 70 with the KeyError)."""
    def git_in(*args: str, given: str) -> str:
        return subprocess.run(["git", *args], cwd=world.checkout, input=given, capture_output=True, text=True,
                              check=True).stdout.strip()

    blob = git_in("hash-object", "-w", "--stdin", given="only here\n")
    gone_tree = git_in("mktree", given=f"100644 blob {blob}\tonly.txt\n")
    gone = git(world.checkout, "commit-tree", "-m", "gone", gone_tree)
    first = world.create(gone)
    remove_execution(world.common, first, group_alive=False)
    assert idle_only(world.pool())
    for sha in (gone, gone_tree):
        (world.common / "objects" / sha[:2] / sha[2:]).unlink()
    second = world.create(world.b)
    exactly(second, world.b)


def test_an_execution_placed_again_at_a_path_whose_entry_is_idle_gives_back(world: World) -> None:
    """Two paths given back leave two idle entries, each named after its path; placing at one of the paths again
    must not take the other entry and write its records over the idle one's (the give back then found the pool's
    folder of that name taken: ``docket integrate`` ended at exit 2, "Directory not empty", in CI)."""
    first, second = world.create(world.a), world.create(world.a)
    for path in (first, second):
        remove_execution(world.common, path, group_alive=False)
    assert idle_only(world.pool())
    for path in (first, second):  # whichever entry sorts first, each path is placed again and given back
        create_execution(world.common, path, world.b)
        exactly(path, world.b)
        remove_execution(world.common, path, group_alive=False)
        assert not os.path.lexists(path) and idle_only(world.pool())
    assert len([p for p in world.pool().iterdir() if p.is_dir()]) == 2


# A process that outlived its check (setsid, docket killed before it could stop it) --------------------------------


def _idle_folder(world: World) -> Path:
    folders = [p for p in world.pool().iterdir() if p.is_dir()]
    assert len(folders) == 1
    return folders[0]


def test_a_folder_swapped_for_a_symlink_in_an_idle_entry_is_never_written_through(world: World,
                                                                                   tmp_path: Path) -> None:
    """A process left running past its check keeps a handle into the folder it ran in, which is now an idle entry:
    it swaps src/ for a symlink to a folder of the user's. The next placement brings B (src/app.py changed) and
    must write nothing there: it writes only through folders it opened itself, never following a symlink."""
    outside = tmp_path / "users-folder"
    outside.mkdir()
    (outside / "app.py").write_text("the user's own file\n")
    first = world.create(world.a)
    assert inspect_execution(world.common, first, world.a).state == "matching"
    remove_execution(world.common, first, group_alive=False)
    idle = _idle_folder(world)
    os.rename(idle / "src", tmp_path / "src-moved")
    os.symlink(outside, idle / "src")
    path = world.path()
    try:
        create_execution(world.common, path, world.b)
    except OSError:
        pass  # refusing is fine; writing through the symlink is not
    assert (outside / "app.py").read_text() == "the user's own file\n"
    assert sorted(p.name for p in outside.iterdir()) == ["app.py"]
    if os.path.lexists(path):
        assert observe_execution(world.common, path, world.b).state != "ready" or exactly(path, world.b) is None
    again = world.create(world.b)
    exactly(again, world.b)


@pytest.mark.parametrize("how", ["tracked-written", "tracked-same-size-time-put-back", "hard-linked",
                                 "symlink-for-folder", "untracked", "top-level", "folder-unreadable"])
def test_what_changes_between_inspection_and_give_back_is_never_observed_ready(world: World, how: str) -> None:
    """The inspection found the execution matching; then a process that escaped the check's group (none can, while
    docket stops every orphan before it inspects) changes it before the give back, which trusts the inspection's
    scan: the next placement is observed diverged or is exactly its commit, never ready and wrong; given back
    again without an inspection, the pool is whole."""
    first = world.create(world.a)
    assert inspect_execution(world.common, first, world.a).state == "matching"
    _plant(first, how)
    remove_execution(world.common, first, group_alive=False)
    assert not os.path.lexists(first) and idle_only(world.pool())
    for commit in (world.a, world.b, world.a):
        path = world.path()
        create_execution(world.common, path, commit)
        if observe_execution(world.common, path, commit).state == "ready":
            exactly(path, commit)
            assert inspect_execution(world.common, path, commit).state == "matching"
        remove_execution(world.common, path, group_alive=False)
    path = world.create(world.b)
    exactly(path, world.b)


@pytest.mark.parametrize("how", ["tracked-written", "tracked-same-size-time-put-back", "untracked",
                                 "symlink-for-folder"])
def test_what_changes_in_an_idle_entry_is_never_observed_ready(world: World, how: str) -> None:
    """An escaped process writes into an idle entry (after the give back): the next placement is observed
    diverged or is exactly its commit, never ready and wrong."""
    first = world.create(world.a)
    remove_execution(world.common, first, group_alive=False)
    _plant(_idle_folder(world), how)
    path = world.path()
    try:
        create_execution(world.common, path, world.a)
    except OSError:
        return
    if observe_execution(world.common, path, world.a).state == "ready":
        exactly(path, world.a)


def test_a_given_back_git_dir_is_kept_and_only_its_head_index_and_exclude_replaced(world: World) -> None:
    first = world.create(world.a)
    kept = os.lstat(first / ".git").st_ino
    assert inspect_execution(world.common, first, world.a).state == "matching"
    remove_execution(world.common, first, group_alive=False)
    (world.common / "info").mkdir(exist_ok=True)
    (world.common / "info" / "exclude").write_text("*.log\n")  # the user changed theirs meanwhile
    second = world.create(world.b)
    assert os.lstat(second / ".git").st_ino == kept
    exactly(second, world.b)
    assert (second / ".git" / "info" / "exclude").read_text() == "*.log\n"
    assert not [p for p in (second / ".git").rglob("*.tmp")]


@pytest.mark.parametrize("how", ["hook", "head", "config", "exclude-symlink", "git-symlink"])
def test_a_git_dir_written_in_an_idle_entry_is_made_afresh(world: World, tmp_path: Path, how: str) -> None:
    """A process that outlived its check writes the idle entry's .git: the next placement does not keep it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    first = world.create(world.a)
    remove_execution(world.common, first, group_alive=False)
    git_dir = _idle_folder(world) / ".git"
    if how == "hook":
        (git_dir / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch /tmp/owned\n")
    elif how == "head":
        (git_dir / "HEAD").write_text("ref: refs/heads/evil\n")
    elif how == "config":
        with open(git_dir / "config", "a") as f:
            f.write("[core]\n\tfsmonitor = evil\n")
    elif how == "exclude-symlink":
        (git_dir / "info" / "exclude").unlink()
        os.symlink(outside / "exclude", git_dir / "info" / "exclude")
    else:
        os.rename(git_dir, tmp_path / "moved-git")
        os.symlink(outside, git_dir)
    second = world.create(world.b)
    exactly(second, world.b)
    assert not (second / ".git" / "hooks" / "post-checkout").exists()
    assert "evil" not in (second / ".git" / "config").read_text()
    assert list(outside.iterdir()) == []
