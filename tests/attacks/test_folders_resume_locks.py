"""`docket go --resume` right after a SIGKILL that left a ref's lock: one resume always finishes the run.

A lock whose writer recorded itself (ref_locks.py) and is now dead is stale at once; a lock nobody recorded is
waited out (STALE_LOCK_SECONDS) within the resume, never answered with exit 4."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.go_world import DELIVERED, GoWorld, docket_processes, make_go_world

ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "add the greeting"\nprompt = "write greet.py: print(1)"\n'


def _locks(world: GoWorld) -> list[Path]:
    return sorted((world.repo / ".git" / "refs" / "docket").rglob("*.lock"))


def _delivered(world: GoWorld, done) -> None:  # noqa: ANN001
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert _locks(world) == []
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []


REF_LOCK_POINTS = ["ref:after-lock@candidates", "ref:after-lock@integrations"]


@pytest.mark.parametrize("scope", [p.split("@")[1] for p in REF_LOCK_POINTS])
def test_a_resume_right_after_a_kill_holding_a_ref_lock_finishes_the_run(tmp_path: Path, scope: str):
    world = make_go_world(tmp_path)
    killed = world.go("r1", "--parallel", "3", fault=f"ref:after-lock@{scope}")
    assert killed.returncode == -9, killed.stderr
    assert _locks(world), "the kill left the ref's lock"
    resumed = world.resume("r1")
    _delivered(world, resumed)
    for path, text in DELIVERED.items():
        assert world.file_at("main", path) == text
    claims = world.repo / ".git" / "docket" / "ref-claims"
    assert not claims.exists() or list(claims.iterdir()) == []  # the dead writer's claim went with its lock


def test_a_fresh_lock_nobody_recorded_is_waited_out_within_the_resume(tmp_path: Path):
    """A lock on the run's integration ref left by a writer docket knows nothing of (an older docket, a tool):
    fresh, it is not broken at once, but the resume waits the window out and delivers, in one command."""
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    killed = world.go("r1", fault="go:after-pin")  # its step not queued: the integration ref not yet made
    assert killed.returncode == -9, killed.stderr
    lock = world.repo / ".git" / "refs" / "docket" / "integrations" / "r1.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")  # fresh: as a writer killed a moment ago leaves it
    resumed = world.resume("r1")
    _delivered(world, resumed)
    assert world.file_at("main", "greet.py") == "print(1)\n"


def test_a_lock_whose_recorded_writer_is_dead_is_broken_without_waiting(tmp_path: Path, monkeypatch):
    """In process, with a real repository: a claim naming a dead process (a child that exited) makes its lock stale
    at once (waiting would call ref_locks' sleep, which here fails the test); a claim naming a live process (this
    one) is waited on, and its lock is never broken."""
    from dulwich.repo import Repo

    from docket.adapters.world.git import ref_locks

    repo_path, dead = _repository_and_a_dead_writer(tmp_path)
    with Repo(str(repo_path)) as repo:
        head = repo.head()
        ref = "refs/docket/candidates/r1/b1"
        lock = Path(str(repo_path / ".git" / ref) + ".lock")
        lock.parent.mkdir(parents=True)
        lock.write_text("")
        ref_locks.claim_for(repo, ref, dead)  # what a writer killed holding the lock left
        monkeypatch.setattr(ref_locks, "_sleep", lambda seconds: pytest.fail("waited for a dead writer's lock"))
        assert ref_locks.write_ref(repo, ref, lambda: repo.refs.add_if_new(ref.encode(), head))
        assert repo.refs[ref.encode()] == head and not lock.exists()

        other = "refs/docket/candidates/r1/b2"
        lock = Path(str(repo_path / ".git" / other) + ".lock")
        lock.write_text("")
        ref_locks.claim_for(repo, other, ref_locks.writer_identity(os.getpid()), thread=-1)  # alive: this process
        waited = []
        monkeypatch.setattr(ref_locks, "_sleep", waited.append)
        assert not ref_locks.write_ref(repo, other, lambda: repo.refs.add_if_new(other.encode(), head))
        assert lock.exists() and waited  # a live writer's lock is waited on, never broken


def test_a_dead_writers_claims_without_a_lock_are_swept_by_the_next_process_to_write(tmp_path: Path):
    """A SIGKILL finds other threads between their claim and its removal, holding no lock (their ref written, or
    not yet begun): no lock will ever lead a writer to those claims, so a process's first write sweeps them. A dead
    writer's claim beside its ref's lock stays (it makes that lock stale at once), and so does a live writer's."""
    from dulwich.repo import Repo

    from docket.adapters.world.git import ref_locks

    repo_path, dead = _repository_and_a_dead_writer(tmp_path)
    with Repo(str(repo_path)) as repo:
        head = repo.head()
        written, locked, alive = (f"refs/docket/candidates/r1/b{n}" for n in (1, 2, 3))
        swept = ref_locks.claim_for(repo, written, dead)
        kept = ref_locks.claim_for(repo, locked, dead, thread=2)
        lock = Path(str(repo_path / ".git" / locked) + ".lock")
        lock.parent.mkdir(parents=True)
        lock.write_text("")
        live = ref_locks.claim_for(repo, alive, ref_locks.writer_identity(os.getpid()), thread=-1)
        ref_locks._SWEPT.clear()  # as in a new process
        ref = "refs/docket/candidates/r2/b1"
        assert ref_locks.write_ref(repo, ref, lambda: repo.refs.add_if_new(ref.encode(), head))
    assert swept is not None and not swept.exists()
    assert set(swept.parent.iterdir()) == {kept, live}


def _repository_and_a_dead_writer(tmp_path: Path) -> tuple[Path, dict]:
    """A real repository, and the identity a claim records of a process that has exited (a child of this one)."""
    import subprocess
    import sys

    from docket.adapters.world.git import ref_locks
    from tests.conftest import make_repo

    repo_path = make_repo(tmp_path / "repo")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = ref_locks.writer_identity(child.pid)
    child.wait()
    assert dead is not None
    return repo_path, dead
