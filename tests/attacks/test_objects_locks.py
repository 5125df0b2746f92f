"""Stale lock files on loose objects (issue 21, item 2).

dulwich writes a loose object through ``objects/xx/<sha>.lock``; a docket process SIGKILLed inside that write leaves
the lock behind, and every later write of the same object found it (FileLocked: exit 70 on every resume). Objects
are content-addressed, so a lock older than the ref locks' threshold is a killed writer's and is removed; `docket
replay` and `docket reconcile` report such locks and `reconcile --apply` removes the stale ones.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from docket.adapters.world.git.ref_locks import STALE_LOCK_SECONDS
from tests.conftest import git
from tests.e2e.go_world import make_go_world



def _unreachable_loose(repo: Path) -> list[str]:
    out = git(repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress")
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "unreachable":
            sha = parts[2]
            if (repo / ".git" / "objects" / sha[:2] / sha[2:]).exists():
                found.append(sha)
    return found


def _plant_lock(repo: Path, sha: str, age: float) -> Path:
    lock = repo / ".git" / "objects" / sha[:2] / f"{sha[2:]}.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_bytes(b"")
    then = time.time() - age
    os.utime(lock, (then, then))
    return lock


def _object_locks(repo: Path) -> list[Path]:
    return sorted((repo / ".git" / "objects").glob("??/*.lock"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    world = make_go_world(tmp_path_factory.mktemp("reference"), target="trunk")
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    assert done.returncode == 0, done.stderr
    return world.tree_of("trunk")


def test_a_killed_object_write_leaves_a_lock_that_no_longer_wedges_the_run(tmp_path, reference):
    world = make_go_world(tmp_path, target="trunk")
    killed = world.go("r1", "--target", "trunk", "--parallel", "3", fault="integrate:after-merge-computed")
    assert killed.returncode == -9, killed.stderr
    # the merge's objects, written unreferenced, become what a writer killed inside dulwich's write leaves: no object,
    # its lock (old enough to be a dead writer's)
    planted = []
    for sha in _unreachable_loose(world.repo):
        (world.repo / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
        planted.append(_plant_lock(world.repo, sha, STALE_LOCK_SECONDS + 30))
    assert planted
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.tree_of("trunk") == reference
    assert git(world.repo, "fsck", "--strict", "--no-progress") == ""
    assert world.run("verify").returncode == 0
    reconcile = world.json("reconcile")
    assert reconcile["git"] == [], reconcile


def test_replay_and_reconcile_report_stale_object_locks_and_apply_removes_only_those(tmp_path):
    world = make_go_world(tmp_path)
    stale = _plant_lock(world.repo, "ab" + "1" * 38, STALE_LOCK_SECONDS + 30)
    fresh = _plant_lock(world.repo, "cd" + "2" * 38, 0)
    ref_lock = world.repo / ".git" / "refs" / "docket" / "candidates" / "x.lock"
    ref_lock.parent.mkdir(parents=True)
    ref_lock.write_bytes(b"")
    then = time.time() - STALE_LOCK_SECONDS - 30
    os.utime(ref_lock, (then, then))

    def writing(lock: Path) -> None:  # another writer holds it right now (was: planted once, it grew stale when
        os.utime(lock, None)          # the commands below took longer than the threshold on a loaded machine)

    writing(fresh)
    replayed = world.run("replay", "--json")
    assert replayed.returncode == 0, replayed.stderr
    locks = json.loads(replayed.stdout)["stale_locks"]
    assert sorted(locks) == sorted([str(stale), str(ref_lock)])
    assert "reconcile --apply" in world.run("replay").stdout
    applied = world.run("replay", "--apply", "--json")  # replay reports; it does not remove
    assert applied.returncode == 0, applied.stderr
    assert stale.exists() and ref_lock.exists()

    writing(fresh)
    found = world.json("reconcile")
    stale_found = sorted(g["path"] for g in found["git"] if g["kind"] == "stale-lock")
    assert stale_found == sorted([str(stale), str(ref_lock)])
    assert stale.exists()
    writing(fresh)
    removed = world.json("reconcile", "--apply")
    assert sorted(g["path"] for g in removed["git"] if g["applied"] == "removed") == stale_found
    assert not stale.exists() and not ref_lock.exists()
    assert fresh.exists()  # another writer's, right now: never broken
    writing(fresh)
    text = world.run("reconcile")
    assert "stale-lock" not in text.stdout
