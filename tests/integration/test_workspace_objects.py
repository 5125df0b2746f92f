"""A workspace's own object store is the agent's to write: what docket reads from it is hashed again.

Pinning copies what a candidate needs into the user's repository only as objects whose bytes hash to their ids,
and a tree planted in a workspace under another tree's id is refused, never remembered for other workspaces.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from docket.adapters.world.git import capture as capture_module
from docket.adapters.world.git.capture import capture_twice
from docket.adapters.world.files.paths import task_worktree_path
from docket.adapters.world.workspaces.port import DulwichWorkspaces
from docket.domain.kernel.errors import Refused
from tests.conftest import git


def plant(workspace: Path, oid: str, kind: bytes, body: bytes) -> None:
    """A loose object file named oid holding other bytes, in the workspace's own store (read before alternates)."""
    folder = workspace / ".git" / "objects" / oid[:2]
    folder.mkdir(exist_ok=True)
    (folder / oid[2:]).write_bytes(zlib.compress(kind + b" %d\0" % len(body) + body))


@pytest.fixture
def workspace(repo: Path) -> tuple[Path, Path, str]:
    common, base = repo / ".git", git(repo, "rev-parse", "HEAD")
    path = task_worktree_path(common, "r1", "t1")
    DulwichWorkspaces().create_worktree(common, path, "docket/r1/t1", base)
    capture_module._FLATTENED.clear()  # noqa: SLF001  a tree remembered by an earlier test would not be read
    return common, path, base


def test_an_agent_commit_is_brought_into_the_repository_with_its_new_file(workspace) -> None:
    common, path, base = workspace
    (path / "new.txt").write_text("new\n")
    git(path, "add", "new.txt")
    git(path, "commit", "-qm", "agent")
    head = git(path, "rev-parse", "HEAD")
    assert os.system(f"git -C {common.parent} cat-file -e {head} 2>/dev/null") != 0  # only in the workspace
    (path / "loose.txt").write_text("uncommitted\n")
    got = capture_twice(path, expected_head=None, base=base, artifact_dir=None, repository=common)
    assert got.head == head
    git(common.parent, "cat-file", "-e", head)
    assert git(common.parent, "ls-tree", "-r", "--name-only", got.tree).split() == ["README.md", "loose.txt", "new.txt"]
    git(common.parent, "fsck", "--strict")


def test_a_planted_tree_under_the_heads_tree_id_is_refused(workspace) -> None:
    _, path, base = workspace
    tree = git(path, "rev-parse", "HEAD^{tree}")
    plant(path, tree, b"tree", b"100644 evil.txt\0" + bytes(20))
    with pytest.raises(Refused) as refused:
        capture_twice(path, expected_head=None, base=base, artifact_dir=None)
    assert refused.value.code == "worktree-unreadable" and tree in refused.value.message


def test_a_planted_blob_is_never_copied_into_the_repository(workspace) -> None:
    common, path, base = workspace
    (path / "new.txt").write_text("honest\n")
    oid = git(path, "hash-object", "new.txt")
    got = capture_twice(path, expected_head=None, base=base, artifact_dir=None)  # new.txt's blob: workspace only
    (path / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    plant(path, oid, b"blob", b"a different content\n")
    from docket.adapters.world.git.capture import bring_home

    with pytest.raises(Refused) as refused:
        bring_home(path, common, got)
    assert refused.value.code == "worktree-unreadable" and oid in refused.value.message
    assert os.system(f"git -C {common.parent} cat-file -e {oid} 2>/dev/null") != 0
