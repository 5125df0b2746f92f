"""A workspace's checkout written by several threads: every file, executable and symlink as git would write it, the
index git's own, and a write failing in any thread undoing the whole creation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.files.paths import task_branch, task_worktree_path
from docket.adapters.world.workspaces.port import DulwichWorkspaces
from tests.conftest import git

BRANCH = task_branch("run-1", "task-1")


def test_many_files_in_nested_folders_are_checked_out_whole_and_clean(repo: Path) -> None:
    for i in range(700):  # more than several batches for each writer thread
        folder = repo / f"pkg{i % 7}" / f"mod{i % 23}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i}.py").write_text(f"value = {i % 50}\n")  # many paths share a blob
    (repo / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(repo / "run.sh", 0o755)
    os.symlink("pkg0/mod0/file0.py", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many")
    git(repo, "gc", "-q")  # the blobs read from a pack
    common, base = repo / ".git", git(repo, "rev-parse", "HEAD")
    path = task_worktree_path(common, "run-1", "task-1")
    DulwichWorkspaces().create_worktree(common, path, BRANCH, base)
    assert git(path, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(path, "ls-files", "--stage") == git(repo, "ls-files", "--stage")
    assert git(path, "diff", "--stat") == ""  # the index's stat data is current: nothing re-read differs
    assert (path / "pkg3" / "mod10" / "file10.py").read_text() == "value = 10\n"
    assert os.stat(path / "run.sh").st_mode & 0o111 and not os.stat(path / "pkg0" / "mod0" / "file0.py").st_mode & 0o111
    assert os.readlink(path / "link") == "pkg0/mod0/file0.py"
    git(path, "fsck", "--strict")


@pytest.mark.parametrize("clash", [b"file-and-folder", b"folder-twice"])
def test_a_write_failing_in_a_thread_undoes_the_creation(repo: Path, clash: bytes) -> None:
    """A tree naming 'clash' twice (git refuses to make one; it can be stored), among enough folders that threads
    make them: the second cannot be written where the first is, and nothing is left beside or at the path."""
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, check=True, capture_output=True,
                          input="x\n", text=True).stdout.strip()
    inner = subprocess.run(["git", "mktree"], cwd=repo, check=True, capture_output=True,
                           input=f"100644 blob {blob}\tinside\n", text=True).stdout.strip()
    first = (b"100644 clash\0" + bytes.fromhex(blob) if clash == b"file-and-folder"
             else b"40000 clash\0" + bytes.fromhex(inner))
    folders = b"".join(b"40000 d%02d\0" % i + bytes.fromhex(inner) for i in range(100))
    body = first + b"40000 clash\0" + bytes.fromhex(inner) + folders
    tree = subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--literally", "--stdin"], cwd=repo, check=True,
                          capture_output=True, input=body).stdout.decode().strip()
    commit = git(repo, "commit-tree", tree, "-m", "clash")
    common = repo / ".git"
    path = task_worktree_path(common, "run-1", "task-1")
    with pytest.raises(FileExistsError):
        DulwichWorkspaces().create_worktree(common, path, BRANCH, commit)
    assert not path.exists()
    assert list(path.parent.iterdir()) == []  # the staging folder removed
