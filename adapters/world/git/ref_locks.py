"""Ref writes that survive a docket process SIGKILLed in the middle of one.

dulwich changes a ref by creating ``<ref>.lock`` (create-only), writing the new
value into it and renaming it over the ref. A process killed before the rename
leaves the lock behind for good: the ref still holds its old value (the rename
is what changes it), but every later write finds the lock and raises
FileLocked. Git itself then refuses until someone removes the lock by hand.

Under ``refs/docket/`` only docket writes, each write holding its lock for
milliseconds, so a lock there older than STALE_LOCK_SECONDS is a killed
writer's (adapters/world/git/stale_locks.py): it is removed and the compare-and-swap tried once more. Elsewhere
(branches users and their tools share) a lock is never broken. Either way a
write that still finds a lock does nothing: the caller observes again, as
after any act.

Each writer first records who it is (a claim: ``<git common dir>/docket/ref-claims/<ref digest>.<pid>.<thread>``
holding its process identity, pid and start time, and the ref), and removes it once its write is done. A lock found with
claims, every one of a process now dead, is its dead writer's: stale at once, so a resume right after a SIGKILL
goes on without waiting. A lock nobody claimed (an older docket, another tool) is waited out: until it goes or
grows stale, within the write, so a resume never ends in outcome-unknown for it. A lock a live writer claimed is
waited on and never broken. A writer killed between its claim and its removal without holding the ref's lock (a
thread of a SIGKILLed docket that had written its ref, or not yet begun to) leaves a claim no lock will ever lead
to: each process's first write sweeps those away (a dead writer's claim whose ref has no lock).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ....domain.kernel.errors import DocketError
from ....domain.containment.processes import ProcessIdentity
from .. import faults
from .stale_locks import STALE_LOCK_SECONDS
from ..processes.lifecycle import PsutilProcesses

__all__ = ["STALE_LOCK_SECONDS", "claim_for", "write_ref", "writer_identity"]

POLL_SECONDS = 0.05
_sleep = time.sleep  # the one way this module waits
DOCKET_REFS = "refs/docket/"
TASK_BRANCHES = "refs/heads/docket/"  # the branches docket makes for its task worktrees (docket/RUN/TASK)


def write_ref(repo: Any, ref: str, write: Callable[[], Any]) -> bool:
    """Run write (one dulwich compare-and-swap of ref); False when a lock kept it from running."""
    from dulwich.file import FileLocked

    _reflog_folder(repo, ref)
    with _claimed(repo, ref):
        _crash_holding_the_lock(repo, ref)
        try:
            _through_vanishing_folders(repo, ref, write)
            return True
        except FileLocked as locked:
            if not _stale_docket_lock(repo, ref, locked):
                return False
        try:
            _through_vanishing_folders(repo, ref, write)
            return True
        except FileLocked:
            return False


def writer_identity(pid: int) -> dict[str, Any] | None:
    """The identity (host, boot, pid, start time) a claim records of the process pid; None if it cannot be read."""

    identity = PsutilProcesses().identity(pid)
    return None if identity is None else identity.as_dict()


def claim_for(repo: Any, ref: str, identity: dict[str, Any] | None, *, thread: int | None = None) -> Path | None:
    """Record identity as a writer of ref (best effort: None when the claim cannot be written, and then a lock it
    leaves is waited out instead)."""
    if identity is None:
        return None
    folder = _claims_folder(repo)
    name = _claim_name(ref, threading.get_ident() if thread is None else thread, identity["pid"])
    try:
        from ..files.files import own_folder

        own_folder(folder.parent, folder)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps({**identity, "ref": ref}).encode("utf-8"))
        finally:
            os.close(fd)
        return path
    except (OSError, DocketError):  # a planted symlink (reconcile reports it), a full disk: no claim, no harm
        return None


@contextmanager
def _claimed(repo: Any, ref: str) -> Iterator[None]:
    if not _is_docket_ref(ref):
        yield
        return
    _sweep_once(repo)
    claim = claim_for(repo, ref, _own_identity())
    try:
        yield
    finally:
        if claim is not None:
            claim.unlink(missing_ok=True)


_OWN: dict[int, dict[str, Any] | None] = {}
_SWEPT: set[tuple[int, str]] = set()  # (pid, claims folder): swept once per process and repository


def _sweep_once(repo: Any) -> None:
    folder = _claims_folder(repo)
    key = (os.getpid(), str(folder))
    if key not in _SWEPT:
        _SWEPT.add(key)
        sweep_dead_claims(repo)


def sweep_dead_claims(repo: Any) -> list[str]:
    """Remove the claims of writers now dead whose ref has no lock (nothing will ever lead to them); the refs they
    named. A dead writer's claim beside its ref's lock is kept: it is what makes that lock stale at once."""
    folder = _claims_folder(repo)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    processes = PsutilProcesses()
    refs_path = Path(os.fsdecode(repo.refs.path))
    swept = []
    for name in names:
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                recorded = json.loads(os.read(fd, 4096))
            finally:
                os.close(fd)
            ref, identity = recorded["ref"], ProcessIdentity.from_dict(recorded)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # gone meanwhile, unreadable, or an older claim without its ref: left to its lock's writer
        if not isinstance(ref, str) or name.split(".")[0] != _digest(ref) or not _is_docket_ref(ref):
            continue
        if processes.liveness(identity) == "dead" and not os.path.lexists(refs_path / (ref + ".lock")):
            (folder / name).unlink(missing_ok=True)
            swept.append(ref)
    return swept


def _own_identity() -> dict[str, Any] | None:
    pid = os.getpid()  # per pid: a forked child is another writer
    if pid not in _OWN:
        _OWN[pid] = writer_identity(pid)
    return _OWN[pid]


def _claims_folder(repo: Any) -> Path:
    return Path(os.fsdecode(repo.commondir())) / "docket" / "ref-claims"


def _claim_name(ref: str, thread: int, pid: int | None = None) -> str:
    return f"{_digest(ref)}.{os.getpid() if pid is None else pid}.{thread}"


def _digest(ref: str) -> str:
    return hashlib.sha256(ref.encode("utf-8")).hexdigest()[:32]


def _claimants(repo: Any, ref: str) -> list[tuple[Path, ProcessIdentity | None]]:
    """The claims on ref, each with the identity it records (None: unreadable)."""
    folder = _claims_folder(repo)
    prefix = _digest(ref) + "."
    try:
        names = [name for name in os.listdir(folder) if name.startswith(prefix)]
    except OSError:
        return []
    found: list[tuple[Path, ProcessIdentity | None]] = []
    for name in names:
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
            found.append((folder / name, ProcessIdentity.from_dict(json.loads(data))))
        except FileNotFoundError:
            continue  # its writer finished meanwhile
        except (OSError, ValueError, KeyError, TypeError):
            found.append((folder / name, None))
    return found


def _writers_dead(claims: list[tuple[Path, ProcessIdentity | None]]) -> bool:
    """Whether every claim names a process positively dead (their claims are then removed)."""

    processes = PsutilProcesses()
    if any(identity is None or processes.liveness(identity) != "dead" for _, identity in claims):
        return False
    for path, _ in claims:
        path.unlink(missing_ok=True)
    return True


def _crash_holding_the_lock(repo: Any, ref: str) -> None:
    """The crash point ref:after-lock: take the ref's lock as dulwich does, then die holding it."""
    scope = ref.split("/")[2] if ref.startswith(DOCKET_REFS) else None
    if scope is None or not faults.armed("ref:after-lock", scope):
        return
    lock = Path(os.fsdecode(repo.refs.path)) / (ref + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    faults.crash_point("ref:after-lock", scope)


def _is_docket_ref(ref: str) -> bool:
    return ref.startswith(DOCKET_REFS) or ref.startswith(TASK_BRANCHES)


def _through_vanishing_folders(repo: Any, ref: str, write: Callable[[], Any], tries: int = 5) -> None:
    """write, again when a folder on the ref's way vanished as dulwich made it (``git pack-refs``, run by ``git gc``,
    removes the ref folders it empties)."""
    for _ in range(tries - 1):
        try:
            write()
            return
        except FileNotFoundError:
            _reflog_folder(repo, ref)
    write()


def _reflog_folder(repo: Any, ref: str) -> None:
    """Make the folder of the ref's reflog first: dulwich makes it with os.mkdir after checking it is missing, so two
    writers (threads or processes) making the first ref under one folder at once fail with FileExistsError, after
    the ref itself was written."""
    try:
        path = repo._reflog_path(ref.encode("utf-8"))
    except (AttributeError, TypeError, ValueError):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)


def _stale_docket_lock(repo: Any, ref: str, locked: Any) -> bool:
    """Whether the ref's own lock is gone now or was removed as stale: its claimed writers are all dead, or nobody
    claims it and it grew older than STALE_LOCK_SECONDS (waited for, within this call). A lock a live writer
    claims is waited on until it goes, never broken."""
    if not _is_docket_ref(ref):
        return False
    lock = Path(os.fsdecode(locked.lockfilename))
    expected = Path(os.fsdecode(repo.refs.path)) / (ref + ".lock")
    if lock != expected:  # e.g. packed-refs.lock: shared with every git process, never broken
        return False
    mine = _claim_name(ref, threading.get_ident())
    for _ in range(int(STALE_LOCK_SECONDS / POLL_SECONDS) + 2):
        try:
            age = time.time() - lock.lstat().st_mtime
        except FileNotFoundError:
            return True  # its writer finished or gave up meanwhile: try again
        others = [c for c in _claimants(repo, ref) if c[0].name != mine]
        # claimed: stale once every claimant is dead; unclaimed: once old (a clock set back only makes a lock look
        # younger: waited for longer, safely)
        if _writers_dead(others) if others else age >= STALE_LOCK_SECONDS:
            try:
                lock.unlink()
            except FileNotFoundError:
                pass
            return True
        _sleep(POLL_SECONDS)
    return False
