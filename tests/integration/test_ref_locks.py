"""A ref's lock left by a docket process SIGKILLed mid-write: under refs/docket/ a stale one is removed and the write
goes on, a fresh one nobody claims is waited out (tests/attacks/test_folders_resume_locks.py: claimed ones); any
lock on a branch users share is never broken and the write does nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from docket.adapters.world.git.inventory import delete_ref
from docket.adapters.world.git.integration_refs import advance_ref
from docket.adapters.world.git.ref_locks import STALE_LOCK_SECONDS

from ..conftest import git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def lock(repo: Path, ref: str, age: float) -> Path:
    path = repo / ".git" / (ref + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def tip(repo: Path, ref: str) -> str | None:
    out = git(repo, "for-each-ref", "--format=%(objectname)", ref)
    return out or None


def test_a_stale_lock_under_refs_docket_is_removed_and_the_ref_made(repo):
    head = git(repo, "rev-parse", "HEAD")
    ref = "refs/docket/integrations/r1"
    stale = lock(repo, ref, STALE_LOCK_SECONDS + 5)
    advance_ref(repo / ".git", ref, None, head)
    assert tip(repo, ref) == head and not stale.exists()


def test_a_fresh_lock_nobody_claims_is_waited_out_within_the_write(repo, monkeypatch):
    """Was: left, nothing written (a resume right after a kill then ended in outcome-unknown). Now the write waits
    until the lock grows stale (each wait here ages the lock by as long instead of sleeping), then goes on."""
    from docket.adapters.world.git import ref_locks

    head = git(repo, "rev-parse", "HEAD")
    ref = "refs/docket/integrations/r1"
    fresh = lock(repo, ref, 0)
    waits = []

    def aging(seconds: float) -> None:
        waits.append(seconds)
        then = fresh.stat().st_mtime - seconds
        os.utime(fresh, (then, then))

    monkeypatch.setattr(ref_locks, "_sleep", aging)
    advance_ref(repo / ".git", ref, None, head)
    assert tip(repo, ref) == head and not fresh.exists()
    assert sum(waits) >= STALE_LOCK_SECONDS - 1  # it did wait the window out rather than break the lock at once


def test_a_lock_on_a_shared_branch_is_never_broken_however_old(repo):
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "release")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    new = git(repo, "rev-parse", "HEAD")
    old_lock = lock(repo, "refs/heads/release", 3600)
    advance_ref(repo / ".git", "refs/heads/release", head, new)  # was exit 70 (FileLocked) before
    assert tip(repo, "refs/heads/release") == head and old_lock.exists()


def test_a_stale_lock_does_not_keep_a_docket_ref_from_being_deleted(repo):
    head = git(repo, "rev-parse", "HEAD")
    ref = "refs/docket/candidates/r1/" + "a" * 64
    git(repo, "update-ref", ref, head)
    lock(repo, ref, STALE_LOCK_SECONDS * 3)
    delete_ref(repo / ".git", ref, head)
    assert tip(repo, ref) is None
