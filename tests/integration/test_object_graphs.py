"""object_graphs.missing_objects: what a ref's commit reaches that the store lacks, and taking it again from a source
(a workspace's own object store); the walk git's own fsck agrees with."""

from __future__ import annotations

import subprocess

from docket.adapters.world.git.object_graphs import missing_objects
from docket.adapters.world.git.repository import open_repo
from tests.conftest import git, make_repo


def _loose(repo_path, sha: str):
    return repo_path / ".git" / "objects" / sha[:2] / sha[2:]


def test_a_whole_graph_has_nothing_missing_and_a_deleted_blob_or_tree_is_found(tmp_path):
    repo_path = make_repo(tmp_path / "r")
    (repo_path / "sub").mkdir()
    (repo_path / "sub" / "f.txt").write_text("deep\n")
    git(repo_path, "add", "sub/f.txt")
    git(repo_path, "commit", "-q", "-m", "deep")
    head = git(repo_path, "rev-parse", "HEAD")
    blob = git(repo_path, "rev-parse", "HEAD:sub/f.txt")
    subtree = git(repo_path, "rev-parse", "HEAD:sub")
    with open_repo(repo_path) as repo:
        assert missing_objects(repo.object_store, [head]) == []
    kept = _loose(repo_path, blob).read_bytes()
    _loose(repo_path, blob).unlink()
    with open_repo(repo_path) as repo:
        assert missing_objects(repo.object_store, [head]) == [blob]
        assert missing_objects(repo.object_store, [head], complete=[head]) == []  # taken as whole: not entered
    _loose(repo_path, blob).write_bytes(kept)
    _loose(repo_path, subtree).unlink()
    with open_repo(repo_path) as repo:
        assert missing_objects(repo.object_store, [head]) == [subtree]


def test_a_missing_object_a_source_holds_is_copied_back_and_git_finds_the_repository_whole(tmp_path):
    repo_path = make_repo(tmp_path / "r")
    (repo_path / "f.txt").write_text("kept elsewhere\n")
    git(repo_path, "add", "f.txt")
    git(repo_path, "commit", "-q", "-m", "f")
    head = git(repo_path, "rev-parse", "HEAD")
    blob = git(repo_path, "rev-parse", "HEAD:f.txt")
    copy = tmp_path / "copy"
    subprocess.run(["git", "clone", "-q", "--no-local", str(repo_path), str(copy)], check=True)
    _loose(repo_path, blob).unlink()
    with open_repo(repo_path) as repo, open_repo(copy) as source:
        assert missing_objects(repo.object_store, [head], sources=[source.object_store]) == []
    assert git(repo_path, "cat-file", "-p", blob) == "kept elsewhere"
    assert subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo_path).returncode == 0


def test_what_a_tip_shares_with_a_complete_commit_is_not_walked_but_what_it_changes_is(tmp_path):
    repo_path = make_repo(tmp_path / "r")
    (repo_path / "a").mkdir()
    (repo_path / "a" / "old.txt").write_text("old\n")
    git(repo_path, "add", "a")
    git(repo_path, "commit", "-q", "-m", "base")
    base = git(repo_path, "rev-parse", "HEAD")
    shared = git(repo_path, "rev-parse", "HEAD:a/old.txt")
    (repo_path / "a" / "new.txt").write_text("new\n")
    git(repo_path, "add", "a")
    git(repo_path, "commit", "-q", "-m", "tip")
    tip = git(repo_path, "rev-parse", "HEAD")
    new = git(repo_path, "rev-parse", "HEAD:a/new.txt")
    _loose(repo_path, shared).unlink()  # the base's own: taken as whole
    _loose(repo_path, new).unlink()
    with open_repo(repo_path) as repo:
        assert missing_objects(repo.object_store, [tip], complete=[base]) == [new]
        assert missing_objects(repo.object_store, [tip]) == sorted([new, shared])
