"""objects.add_object beside a lock file on the object it writes: a dead writer's (stale) lock is removed and the
write done; a live writer's (young) lock is left alone and the object still stored, by its own file linked in."""

from __future__ import annotations

import os
import time

from docket.adapters.world.git.objects import add_object
from docket.adapters.world.git.repository import open_repo
from docket.adapters.world.git.stale_locks import STALE_LOCK_SECONDS, stale_locks
from tests.conftest import git, make_repo


def _lock_for(repo_path, sha: bytes, age: float):
    hex_id = sha.decode()
    lock = repo_path / ".git" / "objects" / hex_id[:2] / f"{hex_id[2:]}.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_bytes(b"")
    os.utime(lock, (time.time() - age,) * 2)
    return lock


def test_a_stale_object_lock_is_removed_and_the_object_written(tmp_path):
    from dulwich.objects import Blob

    repo_path = make_repo(tmp_path / "r")
    blob = Blob.from_string(b"content a dead writer was writing\n")
    lock = _lock_for(repo_path, blob.id, STALE_LOCK_SECONDS + 5)
    assert stale_locks(repo_path / ".git") == [lock]
    with open_repo(repo_path) as repo:
        assert add_object(repo.object_store, blob) == blob.id
    assert not lock.exists()
    assert git(repo_path, "cat-file", "-p", blob.id.decode()) == "content a dead writer was writing"


def test_a_young_object_lock_is_left_to_its_writer_and_the_object_still_stored(tmp_path):
    from dulwich.objects import Blob

    repo_path = make_repo(tmp_path / "r")
    blob = Blob.from_string(b"content another writer is writing now\n")
    lock = _lock_for(repo_path, blob.id, 0)
    assert stale_locks(repo_path / ".git") == []
    with open_repo(repo_path) as repo:
        assert add_object(repo.object_store, blob) == blob.id
    assert lock.exists()
    assert git(repo_path, "cat-file", "-p", blob.id.decode()) == "content another writer is writing now"
