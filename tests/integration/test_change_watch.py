"""The change watch: a workspace docket made in this process is captured from what its watch reported, and the tree is
exactly what `git add -A` in a private index writes, whatever a hostile process did in it (hard links written from
outside, shared mappings, mtimes set back, folders made and filled at once, moved in and out, symlinks planted, the
event queue flooded); where the watch cannot say, the capture walks the whole workspace, as before it existed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from docket.adapters.world.git import change_watch
from docket.adapters.world.git.capture import Unstable, capture, capture_twice
from docket.adapters.world.workspaces.worktrees import create_worktree
from tests.conftest import git

FILES = {f"pkg{a}/mod{b}/file{c}.txt": f"content {a} {b} {c}\n" for a in range(3) for b in range(3) for c in range(4)}


@pytest.fixture
def made(tmp_path: Path):
    """(common git dir, base commit, the workspace docket made from it in this process)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    os.symlink("pkg0", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    workspace = tmp_path / "data" / "workspaces" / "key" / "run" / "task"
    create_worktree(repo / ".git", workspace, "docket/run/task", base)
    assert change_watch.watch_of(workspace) is not None
    yield repo / ".git", base, workspace
    change_watch.forget_watches()


def git_add_all(workspace: Path, index: Path) -> str:
    """The tree real git writes for the workspace: read-tree HEAD, add -A, write-tree, in a private index."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    index.unlink(missing_ok=True)
    for args in (["read-tree", "HEAD"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=workspace, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "write-tree"], cwd=workspace, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def pin_tree(common: Path, base: str, workspace: Path) -> str:
    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common)
    assert not isinstance(got, Unstable)
    return got.tree


def sh(workspace: Path, script: str) -> None:
    """A hostile process of its own does script in the workspace."""
    subprocess.run(["sh", "-c", script], cwd=workspace, check=True, capture_output=True)


ATTACKS = {
    "edits": "echo changed > pkg0/mod0/file0.txt; rm pkg1/mod1/file1.txt; echo new > pkg2/new.txt; "
             "chmod +x pkg0/mod1/file2.txt; echo x > pkg0/debug.log",
    "hard link written from outside": "ln pkg1/mod2/file3.txt ../../../../outside && echo appended >> "
                                      "../../../../outside",
    "hard link made in, written from outside": "echo a > ../../../../elsewhere && ln ../../../../elsewhere "
                                               "pkg2/mod0/linked.txt && echo b >> ../../../../elsewhere",
    "mtime set back": "touch -r pkg0/mod2/file1.txt ../../../../stamp && echo samesize > pkg0/mod2/file1.txt "
                      "&& printf 'content 0 2 1\\n' > pkg0/mod2/file1.txt && echo 'CONTENT 0 2 1' > "
                      "pkg0/mod2/file1.txt && touch -r ../../../../stamp pkg0/mod2/file1.txt",
    "folder made and filled at once": "mkdir -p fresh/a/b && echo deep > fresh/a/b/f.txt && mkdir pkg1/x && "
                                      "echo y > pkg1/x/y.txt",
    "folder moved in from outside": "mkdir -p ../../../../from/inner && echo in > ../../../../from/inner/i.txt && "
                                    "mv ../../../../from pkg2/mod2/from",
    "folder moved out, then back elsewhere": "mv pkg0/mod0 ../../../../away && echo w > ../../../../away/w.txt && "
                                             "mv ../../../../away pkg1/back",
    "folder renamed, a symlink planted in its place": "mv pkg2 renamed && ln -s /etc pkg2 && "
                                                      "echo z > renamed/mod0/file0.txt",
    "file replaced by a folder": "rm pkg1/mod0/file2.txt && mkdir pkg1/mod0/file2.txt && "
                                 "echo f > pkg1/mod0/file2.txt/inner.txt",
    "ignore rules changed": "echo kept > pkg0/keep.log && echo '!keep.log' > pkg0/.gitignore && mkdir -p build && "
                            "echo b > build/out.txt",
    "symlink retargeted, executable bit dropped": "rm link && ln -s pkg1 link && chmod -x run.sh",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_watched_pin_is_the_tree_git_add_all_writes(made, tmp_path, attack):
    common, base, workspace = made
    sh(workspace, ATTACKS[attack])
    tree = pin_tree(common, base, workspace)
    watch = change_watch.watch_of(workspace)
    assert watch is not None and watch.fast_captures >= 1  # the watch answered: no walk
    assert tree == git_add_all(workspace, tmp_path / "index")
    change_watch.forget_watches([workspace])  # the full walk agrees too
    assert capture(workspace, expected_head=None, base=base, artifact_dir=None).tree == tree


def test_a_write_through_a_shared_mapping_from_outside_is_seen(made, tmp_path):
    common, base, workspace = made
    pin_tree(common, base, workspace)  # a first pin: the file is as committed
    outside = tmp_path / "mapped"
    os.link(workspace / "pkg1" / "mod1" / "file0.txt", outside)
    code = ("import mmap, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nm = mmap.mmap(fd, 0)\n"
            "m[0:7] = b'CHANGED'\nm.close()\nos.close(fd)\n")
    subprocess.run([sys.executable, "-c", code, str(outside)], check=True)
    assert (workspace / "pkg1" / "mod1" / "file0.txt").read_text().startswith("CHANGED")
    assert pin_tree(common, base, workspace) == git_add_all(workspace, tmp_path / "index")
    assert change_watch.watch_of(workspace).fast_captures >= 2


def test_a_flooded_queue_falls_back_to_the_walk(made, tmp_path):
    common, base, workspace = made
    code = ("import os, sys\nfor i in range(12000):\n    p = os.path.join(sys.argv[1], f'f{i}.txt')\n"
            "    with open(p, 'w') as f: f.write('x')\n    os.rename(p, p + '.moved')\n")
    subprocess.run([sys.executable, "-c", code, str(workspace / "pkg0")], check=True)
    (workspace / "pkg2" / "mod2" / "file3.txt").write_text("after the flood\n")
    tree = pin_tree(common, base, workspace)
    assert change_watch.watch_of(workspace) is None  # overflowed: not trusted again
    assert tree == git_add_all(workspace, tmp_path / "index")


def test_a_workspace_made_by_another_process_is_walked(tmp_path, made):
    """A restart: the process that made the workspace (and held its watch) is gone."""
    common, base, _ = made
    other = tmp_path / "data" / "workspaces" / "key" / "run" / "other"
    code = ("import sys\nfrom pathlib import Path\nfrom docket.adapters.world.workspaces.worktrees import create_worktree\n"
            "create_worktree(Path(sys.argv[1]), Path(sys.argv[2]), 'docket/run/other', sys.argv[3])\n")
    subprocess.run([sys.executable, "-c", code, str(common), str(other), base], check=True)
    (other / "pkg0" / "mod0" / "file0.txt").write_text("changed while nobody watched\n")
    assert change_watch.watch_of(other) is None
    assert pin_tree(common, base, other) == git_add_all(other, tmp_path / "index")


def test_a_commit_in_the_workspace_falls_back_to_the_walk(made, tmp_path):
    common, base, workspace = made
    (workspace / "pkg0" / "mod0" / "file0.txt").write_text("committed\n")
    git(workspace, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qam", "agent's commit")
    (workspace / "pkg1" / "mod0" / "file0.txt").write_text("then changed\n")
    assert pin_tree(common, base, workspace) == git_add_all(workspace, tmp_path / "index")
    assert change_watch.watch_of(workspace) is None


def test_a_nested_repository_made_in_a_folder_leaves_it_out_as_the_walk_does(made):
    common, base, workspace = made
    git(workspace / "pkg1", "init", "-q")
    watched = pin_tree(common, base, workspace)
    assert change_watch.watch_of(workspace).fast_captures >= 1
    change_watch.forget_watches([workspace])
    assert capture(workspace, expected_head=None, base=base, artifact_dir=None).tree == watched


def test_a_workspace_over_its_share_of_watches_is_not_watched(made, tmp_path):
    common, base, workspace = made
    assert change_watch.start_watch(workspace, base, [b"pkg0"], [(b"pkg0/a", (0o100644, b"0" * 40))],
                                    limit=1) is None
    assert change_watch.watch_of(workspace) is None
    (workspace / "pkg0" / "mod0" / "file0.txt").write_text("changed\n")
    assert pin_tree(common, base, workspace) == git_add_all(workspace, tmp_path / "index")


def test_a_change_between_the_two_captures_is_unstable(made):
    common, base, workspace = made
    (workspace / "pkg0" / "mod0" / "file0.txt").write_text("one\n")
    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common,
                        between=lambda: (workspace / "pkg0" / "mod0" / "file0.txt").write_text("two\n"))
    assert isinstance(got, Unstable) and got.differing == ("pkg0/mod0/file0.txt",)


def test_a_change_inside_a_new_folder_between_the_two_captures_is_unstable(made):
    """No watch is added in a folder made after the workspace: the second capture walks it again."""
    common, base, workspace = made
    (workspace / "fresh").mkdir()
    (workspace / "fresh" / "a.txt").write_text("one\n")
    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common,
                        between=lambda: (workspace / "fresh" / "a.txt").write_text("two\n"))
    assert isinstance(got, Unstable) and got.differing == ("fresh/a.txt",)


def test_a_new_file_written_between_the_two_captures_is_unstable(made):
    """A file made after the workspace has no watch of its own: the second capture looks at it again."""
    common, base, workspace = made
    (workspace / "pkg0" / "new.txt").write_text("one\n")
    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common,
                        between=lambda: (workspace / "pkg0" / "new.txt").write_text("two\n"))
    assert isinstance(got, Unstable) and got.differing == ("pkg0/new.txt",)


def test_a_hard_link_made_in_and_written_from_outside_between_the_two_captures_is_unstable(made, tmp_path):
    common, base, workspace = made
    outside = tmp_path / "outside.txt"
    outside.write_text("one\n")
    os.link(outside, workspace / "pkg0" / "linked.txt")

    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common,
                        between=lambda: _append(outside, "two\n"))
    assert isinstance(got, Unstable) and got.differing == ("pkg0/linked.txt",)


def test_an_unchanged_second_capture_is_taken_from_the_watch(made):
    common, base, workspace = made
    (workspace / "pkg0" / "mod0" / "file0.txt").write_text("changed in place\n")
    capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common)
    assert change_watch.watch_of(workspace).fast_captures == 1  # the second was not needed


def test_a_new_file_watched_by_a_first_pin_is_seen_written_from_outside_between_the_captures_of_the_next(made,
                                                                                                        tmp_path):
    """A first pin gives a new file a watch of its own: the next pin's second capture may trust the watch for it,
    and a write to it through a hard link from outside between that pin's captures is still reported."""
    common, base, workspace = made
    outside = tmp_path / "outside.txt"
    outside.write_text("one\n")
    os.link(outside, workspace / "pkg0" / "linked.txt")
    pin_tree(common, base, workspace)
    watch = change_watch.watch_of(workspace)
    assert not watch.unwatched

    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common,
                        between=lambda: _append(outside, "two\n"))
    assert isinstance(got, Unstable) and got.differing == ("pkg0/linked.txt",)


def test_a_removed_workspace_gives_its_watch_back_when_the_next_is_made(made, tmp_path):
    import shutil

    common, base, workspace = made
    watch = change_watch.watch_of(workspace)
    shutil.rmtree(workspace)
    create_worktree(common, workspace.parent / "next", "docket/run/next", base)
    assert watch.broken is not None and watch.fd == -1
    assert change_watch.watch_of(workspace) is None and change_watch.watch_of(workspace.parent / "next") is not None


def test_a_workspace_folder_replaced_at_the_same_path_is_walked(made, tmp_path):
    common, base, workspace = made
    moved = tmp_path / "moved"
    workspace.rename(moved)
    subprocess.run(["cp", "-a", str(moved), str(workspace)], check=True)
    (workspace / "pkg0" / "mod0" / "file0.txt").write_text("in the copy\n")
    assert pin_tree(common, base, workspace) == git_add_all(workspace, tmp_path / "index")
    assert change_watch.watch_of(workspace) is None


EXCHANGE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = (os.fsencode(p) for p in sys.argv[1:3])
if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
    raise OSError(ctypes.get_errno(), "renameat2")
"""


@pytest.mark.parametrize("pair", [("pkg0/mod0", "pkg1/mod2"), ("pkg0/mod1/file0.txt", "pkg2/mod2/file3.txt"),
                                  ("pkg1/mod1", "pkg1/mod1/file1.txt")])
def test_two_paths_swapped_in_one_call_are_both_seen(made, tmp_path, pair):
    """renameat2(RENAME_EXCHANGE) swaps two entries (folders, files, or a folder and a file) at once."""
    common, base, workspace = made
    if pair == ("pkg1/mod1", "pkg1/mod1/file1.txt"):  # a folder and a file of another folder
        pair = ("pkg1/mod1", "pkg2/mod0/file1.txt")
    subprocess.run([sys.executable, "-c", EXCHANGE, *(str(workspace / p) for p in pair)], check=True)
    tree = pin_tree(common, base, workspace)
    assert change_watch.watch_of(workspace).fast_captures >= 1
    assert tree == git_add_all(workspace, tmp_path / "index")


def test_a_writer_still_running_makes_the_pin_unstable_or_right(made, tmp_path):
    """A process left writing a file of the workspace while it is pinned: never a tree that was not there."""
    common, base, workspace = made
    target = workspace / "pkg0" / "mod0" / "file1.txt"
    code = ("import sys, time\nend = time.time() + 3\ni = 0\nwhile time.time() < end:\n"
            "    open(sys.argv[1], 'w').write(f'{i}\\n' * (i % 50))\n    i += 1\n")
    writer = subprocess.Popen([sys.executable, "-c", code, str(target)])
    try:
        seen = set()
        for _ in range(20):
            got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common)
            if not isinstance(got, Unstable):
                seen.add(got.tree)
    finally:
        writer.wait()
    possible = {FILES["pkg0/mod0/file1.txt"].encode()} | {f"{i}\n".encode() * (i % 50) for i in range(200_000)}
    for tree in seen:  # each pinned content is one the file held at some moment, never a mix of two
        pinned = subprocess.run(["git", "cat-file", "blob", f"{tree}:pkg0/mod0/file1.txt"], cwd=workspace,
                                check=True, capture_output=True).stdout
        assert pinned in possible
    assert pin_tree(common, base, workspace) == git_add_all(workspace, tmp_path / "index")


def _append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)
