"""Whose folders the data folder holds (adapters/world/workspaces/data_owners.py), on real folders and real git repositories:
the record docket writes, the workspaces' borrowed objects for folders made before it, and what is never removed
(a repository still there, one that cannot be told, symlinks anywhere)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from docket.adapters.world.workspaces.data_owners import OWNERS_FILE, forgotten_data, record_owner
from docket.adapters.world.ledger.identity import ensure_identity
from tests.conftest import make_repo


def key_folders(root: Path, key: str) -> list[Path]:
    found = [root / "workspaces" / key, root / "executions" / key]
    for folder in found:
        folder.mkdir(parents=True)
    return found


def workspace(folder: Path, common: Path, name: str = "r1/r1.t") -> Path:
    """A workspace as docket makes one (its own .git, borrowing common's objects), with an agent's file."""
    place = folder / name
    (place / ".git" / "objects" / "info").mkdir(parents=True)
    (place / ".git" / "objects" / "info" / "alternates").write_text(os.path.realpath(common / "objects") + "\n")
    (place / "work.txt").write_text("an agent's\n")
    return place


def listed(root: Path, *, apply: bool = False, keep: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    return [(f.key, Path(f.path).parent.name, f.action) for f in forgotten_data([root], keep_keys=keep, apply=apply)]


def test_a_recorded_repository_deleted_is_listed_then_removed_and_one_still_there_is_not(tmp_path: Path):
    root = tmp_path / "data"
    gone, here = make_repo(tmp_path / "gone"), make_repo(tmp_path / "here")
    gone_key, here_key = ensure_identity(gone / ".git"), ensure_identity(here / ".git")
    for key, repo in ((gone_key, gone), (here_key, here)):
        for folder in key_folders(root, key):
            record_owner(folder, repo / ".git")
            record_owner(folder, repo / ".git")  # recorded once
            assert (folder / OWNERS_FILE).read_text().count("\n") == 1
        workspace(root / "workspaces" / key, repo / ".git")
    assert listed(root) == []
    shutil.rmtree(gone)
    assert listed(root) == [(gone_key, "executions", "remove"), (gone_key, "workspaces", "remove")]
    assert listed(root, keep=(gone_key,)) == []  # the repository gc runs in: never its own
    assert listed(root, apply=True) == [(gone_key, "executions", "removed"), (gone_key, "workspaces", "removed")]
    assert sorted(p.name for p in (root / "workspaces").iterdir()) == [here_key]
    assert (root / "workspaces" / here_key / "r1" / "r1.t" / "work.txt").exists()


def test_folders_made_before_the_record_are_judged_by_their_workspaces_borrowed_objects(tmp_path: Path):
    root = tmp_path / "data"
    gone = make_repo(tmp_path / "gone")
    key = ensure_identity(gone / ".git")
    workspaces, executions = key_folders(root, key)
    workspace(workspaces, gone / ".git")
    (executions / ".pool" / "abc").mkdir(parents=True)  # an idle pool entry: no .git of its own
    assert listed(root) == []
    shutil.rmtree(gone)
    (found, *_) = forgotten_data([root], apply=False)
    assert found.action == "remove" and "as its workspaces' borrowed objects say" in found.reason
    assert listed(root, apply=True) == [(key, "executions", "removed"), (key, "workspaces", "removed")]
    assert list((root / "workspaces").iterdir()) == [] and list((root / "executions").iterdir()) == []


def test_what_cannot_be_told_is_kept(tmp_path: Path):
    root = tmp_path / "data"
    unknown = "repo-" + "1" * 32
    key_folders(root, unknown)  # no record, no workspace: whose it is is unknown
    (root / "workspaces" / unknown / "r1").mkdir()
    # a path key is the digest of its repository's real path: a workspace claiming another path is not believed
    forged = "path-" + "2" * 32
    workspace(key_folders(root, forged)[0], tmp_path / "never-was" / ".git")
    # a repository at the recorded path whose identity file cannot be read
    odd = make_repo(tmp_path / "odd")
    (odd / ".git" / "docket").mkdir()
    (odd / ".git" / "docket" / "repository-id").mkdir()  # not a file: unreadable, not missing
    odd_key = "repo-" + "3" * 32
    record_owner(key_folders(root, odd_key)[0], odd / ".git")
    found = {(f.key, Path(f.path).parent.name): f for f in forgotten_data([root], apply=True)}
    assert {k: f.action for k, f in found.items()} == {
        (k, where): "keep" for k in (unknown, forged, odd_key) for where in ("executions", "workspaces")}
    assert "unknown" in found[(unknown, "workspaces")].reason
    assert "cannot be read" in found[(odd_key, "workspaces")].reason
    assert all((root / "workspaces" / k).is_dir() for k in (unknown, forged, odd_key))


def test_a_path_key_of_a_gone_repository_is_removed_and_one_of_a_repository_there_is_not(tmp_path: Path):
    root = tmp_path / "data"
    repo = make_repo(tmp_path / "plain")  # no docket identity: keyed by its path
    common = os.path.realpath(repo / ".git")
    key = "path-" + hashlib.sha256(os.fsencode(common)).hexdigest()[:32]
    workspace(key_folders(root, key)[0], repo / ".git")
    assert listed(root) == []
    shutil.rmtree(repo)
    assert listed(root, apply=True) == [(key, "executions", "removed"), (key, "workspaces", "removed")]


def test_symlinks_are_never_followed_nor_their_targets_removed(tmp_path: Path):
    root = tmp_path / "data"
    precious = tmp_path / "precious"
    (precious / "inside").mkdir(parents=True)
    (precious / "inside" / "file").write_text("the user's\n")
    gone = make_repo(tmp_path / "gone")
    key = ensure_identity(gone / ".git")
    workspaces, executions = key_folders(root, key)
    record_owner(workspaces, gone / ".git")
    (workspaces / "r1").mkdir()
    (workspaces / "r1" / "to-precious").symlink_to(precious, target_is_directory=True)
    (workspaces / "r1" / "file-link").symlink_to(precious / "inside" / "file")
    (executions / ".pool").mkdir()
    (executions / ".pool" / "escape").symlink_to(precious / "inside", target_is_directory=True)
    # a symlink at a key's name (and another data folder planted as a symlink): not listed, never entered
    other = "repo-" + "4" * 32
    (root / "workspaces" / other).symlink_to(precious, target_is_directory=True)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "workspaces").mkdir(parents=True)
    (elsewhere / "workspaces" / other).mkdir()
    (elsewhere / "workspaces" / other / "r1").mkdir()
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "workspaces").symlink_to(elsewhere / "workspaces", target_is_directory=True)
    shutil.rmtree(gone)
    assert listed(root, apply=True) == [(key, "executions", "removed"), (key, "workspaces", "removed")]
    assert listed(planted, apply=True) == []
    assert (precious / "inside" / "file").read_text() == "the user's\n"
    assert (root / "workspaces" / other).is_symlink() and (elsewhere / "workspaces" / other / "r1").is_dir()


def test_a_removal_cut_short_is_finished_by_the_next(tmp_path: Path):
    """The record goes last: what a crash left half-removed is still known to be the gone repository's."""
    root = tmp_path / "data"
    gone = make_repo(tmp_path / "gone")
    key = ensure_identity(gone / ".git")
    workspaces, _ = key_folders(root, key)
    workspace(workspaces, gone / ".git")  # judged by its borrowed objects: no record yet
    shutil.rmtree(gone)
    # what a removal that wrote the record and took the workspace, then died, leaves
    record_owner(workspaces, gone / ".git")
    shutil.rmtree(workspaces / "r1")
    assert listed(root, apply=True) == [(key, "executions", "removed"), (key, "workspaces", "removed")]


def test_read_only_folders_a_check_left_are_removed(tmp_path: Path):
    root = tmp_path / "data"
    gone = make_repo(tmp_path / "gone")
    key = ensure_identity(gone / ".git")
    _, executions = key_folders(root, key)
    record_owner(executions, gone / ".git")
    locked = executions / "r1" / "b1" / "check-1" / "locked"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x\n")
    locked.chmod(0o500)
    (executions / "r1" / "b1").chmod(0o000)
    shutil.rmtree(gone)
    assert listed(root, apply=True) == [(key, "executions", "removed"), (key, "workspaces", "removed")]
    assert list((root / "executions").iterdir()) == []
