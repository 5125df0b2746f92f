"""Executions reused, not remade: a pool of execution folders per repository, each brought from the tree it last
held to the next commit's by writing only the paths that differ.

The pool is ``<executions root>/.pool`` (beside the runs' folders, a dot name the inventory skips). Every folder
docket places at an execution's path comes from it and goes back to it:

- **place** (``create_execution``): an idle entry (or a fresh checkout, when none is idle) is brought to the commit's
  tree: the paths ``tree_changes`` names between the two trees (unchanged subtrees skipped) are unlinked and written
  anew, a fresh ``.git`` is written (the last check could have written anything in the old one), the records are
  written, then one rename puts the folder at the execution's path.
- **give back** (``remove_execution``, once the check's process group is gone): the folder is renamed back into the
  pool at once (the execution's path is free), then compared with its records: what the check added is removed,
  what it wrote or deleted is written again from the object store, its ``.git`` is dropped; it is idle again. A
  folder replaced, a symlink where a folder was, anything that cannot be read: the entry is discarded. When this
  process inspected the same placement and found it matching, the give back takes that inspection's scan instead of
  scanning again (see below why that is sound).

**The records** (execution_records.py: path -> ino, ctime, size, mode, blob id, for every file, folder and ``.git``
entry) are kept beside the folder in the pool, never inside it: a check (untrusted code) can write anything in its execution, but not
there. ctime cannot be set by an unprivileged process, so a file whose (ino, ctime, size, mode) are as recorded, with
one link, has not been written since; before an entry is placed, the file system's clock is made to pass every
recorded ctime (``_tick``), so a later write cannot share one. Anything else is put back, removed or the entry
discarded. The records of a placed entry are named after its path, so its observation and inspection find them.

**What the trust rests on.** Only two comparisons vouch for an execution: the observation after it is placed
(``observe_placed``: ready) and the inspection after its check (``inspect_placed``: matching), both against records
docket wrote outside the sandbox, whose every stat docket read of content it wrote or read and hashed itself. A
write after such a stat moves the entry's ctime (or, for a folder, the ctime of the folder it changed) and is seen
by the next comparison. Placing and giving back only make an entry likely to be found clean; neither vouches.
So the give back may reuse its placement's matching inspection: docket stops every process the check left before
it inspects (process_tree.py: subreapers, every orphan killed and reaped), so in the normal course nothing changes
between the two; and if something did (a process that outlived a docket killed earlier), the entry's records
then name a stat the change moved, and the next placement is observed diverged, never ready and wrong (it is
given back with a full scan and repaired). The inspection is reused only in the process that made it, for the same
placement (top folder, marker, commit).

**Writes never follow a symlink.** An escaped process that still holds a folder of an idle entry can swap a folder
for a symlink at any moment, so every write into an entry (placing, repairing) goes through folders opened one name
at a time from the entry's top with ``O_NOFOLLOW`` (``_Folders``), never through a path; a swapped folder fails the
open, and the entry is discarded. A repaired file's stat is taken of the very file whose content was hashed.

**Crash safety.** An entry is trusted only as its records say: ``idle`` with its folder in the pool, or ``placed``
with its folder at the recorded path. A take first deletes the idle records (an entry without records is unknown),
a give back renames the folder into the pool before rewriting the records (a placed record whose folder is in the
pool is unknown): an unknown entry is discarded by the next sweep, or by ``docket reconcile --apply``. Every step
runs under the worktrees lock. ``docket gc`` removes idle entries (all once no run is open, else beyond the newest
``KEEP_IDLE``); a placed one never.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import time
from pathlib import Path

from .execution_records import GITLINK, Records, file_record, folder_record, read_records, write_records
from ..faults import crash_point
from ..git.ids import commit_at
from .execution_writes import Unusable, _bring, _is_folder, _parents, _remove, _unlink, _write_git
from ..git.own_repositories import make_own_repository

__all__ = [
    "KEEP_IDLE", "POOL", "Records", "clear_idle", "discard_records", "idle_only", "place", "pool_of", "records_of",
    "remnant", "sweep", "untrusted",
]

POOL = ".pool"
KEEP_IDLE = 4  # idle entries kept per repository; more given back are removed


def pool_of(path: Path) -> Path:
    """The pool of the execution at ``<root>/executions/<key>/<run>/<binding>/<name>``."""
    return Path(path).parents[2] / POOL


def _entry_id(path: Path) -> str:
    return hashlib.sha256(os.fsencode(str(path))).hexdigest()[:24]


def records_of(path: Path) -> Records | None:
    """The records of the entry placed at path (None: no pooled execution is placed there)."""
    path = Path(path)
    records = read_records(pool_of(path) / f"{_entry_id(path)}.rec")
    if records is None or records.state != "placed" or records.path != str(path):
        return None
    return records


def idle_only(pool: Path) -> bool:
    """Whether every entry of the pool is idle, its records beside it (none placed, none half-way): what a pool
    holds once every execution made from it is removed."""
    if not os.path.lexists(pool):
        return True
    names = set(os.listdir(pool)) - {".clock"}
    folders = {n for n in names if not n.endswith(".rec")}
    records = {n[:-4]: read_records(pool / n) for n in names if n.endswith(".rec")}
    return folders == set(records) and all(r is not None and r.state == "idle" for r in records.values())


def remnant(path: Path) -> bool:
    """Whether the pool holds what a give back of the execution at path killed half-way left: its folder renamed
    back but not recorded idle (the next sweep discards it). Never raises."""
    path = Path(path)
    try:
        folder_id = _entry_id(path)
        records = read_records(pool_of(path) / f"{folder_id}.rec")
        if _is_folder(pool_of(path) / folder_id):
            return records is None or records.state != "idle"
        return records is not None and records.state == "placed" and not os.path.lexists(path)
    except OSError:
        return False


def sweep(path: Path) -> None:
    """Discard what no trustworthy record describes in the pool of the execution at path (hold the worktrees lock)."""
    pool = pool_of(Path(path))
    if _is_folder(pool):
        _sweep(pool)


def discard_records(path: Path) -> None:
    """Forget the entry placed at path (its folder removed the old way)."""
    try:
        os.unlink(pool_of(Path(path)) / f"{_entry_id(Path(path))}.rec")
    except FileNotFoundError:
        pass


# Place ------------------------------------------------------------------------------------------------------------


def place(common: Path, path: Path, commit: str) -> bool:
    """Put an execution of commit at path (absent; its parents made) from the pool. Hold the worktrees lock.

    False when the pool cannot (the caller makes it the old way). InvalidPathError for a tree naming a path git
    would refuse to write, after discarding the entry; OSError for real I/O failures."""
    from dulwich.repo import Repo

    pool = pool_of(path)
    _own_folder(pool)
    _sweep(pool)
    with Repo(str(common)) as user:
        store = user.object_store
        try:
            tree = commit_at(user, commit).tree.decode("ascii")
        except KeyError:
            return False
        entry = _idle_entry(pool, _entry_id(path))
        if entry is None:
            try:
                entry = _fresh_entry(common, pool, commit, tree)
            except Unusable:
                return False
            if entry is None:
                return False
        folder_id, records = entry
        folder = pool / folder_id
        os.unlink(pool / f"{folder_id}.rec")  # from here the entry is unknown until placed (a crash: discarded)
        crash_point("execution-pool:after-take")
        try:
            _bring(store, folder, records, tree)
            _write_git(common, store, folder, commit, records)
        except Unusable:
            _discard(pool, folder_id)
            return False
        except BaseException:
            _discard(pool, folder_id)
            raise
    records.state, records.path, records.commit, records.tree = "placed", str(path), commit, tree
    records.top_ino = os.lstat(folder).st_ino
    records.marker = _tick(pool, max([t[3] for t in records.files.values()] + [t[1] for t in records.folders.values()]
                                     + [t[1] for t in records.git.values()] + [0]))
    placed = pool / f"{_entry_id(path)}.rec"
    write_records(placed, records)
    crash_point("execution-pool:before-place")
    try:
        os.rename(folder, path)
    except OSError:
        os.unlink(placed)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    crash_point("execution-pool:after-place")
    return True


def _own_folder(pool: Path) -> None:
    try:
        os.mkdir(pool, 0o700)
    except FileExistsError:
        pass
    if not stat.S_ISDIR(os.lstat(pool).st_mode):
        raise OSError(f"{pool} is not a folder")
    clock = pool / ".clock"
    if not os.path.lexists(clock):
        os.close(os.open(clock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))


def _sweep(pool: Path, *, apply: bool = True) -> list[str]:
    """Discard what no trustworthy record describes: a folder without idle records, records whose folder is
    elsewhere than they say, leftovers of a write or a checkout cut short. The names discarded (apply) or that
    would be."""
    names = set(os.listdir(pool))
    found: list[str] = []
    for name in sorted(names):
        item = pool / name
        if name == ".clock":
            continue
        if name.endswith(".rec"):
            records = read_records(item)
            folder_id = name[:-4]
            if records is None:
                found.append(name)
            elif records.state == "idle" and not _is_folder(pool / folder_id):
                found.append(name)
            elif records.state == "placed":
                if folder_id in names or not _is_folder(Path(records.path)):
                    found.append(name)  # given back half-way, or its folder gone: nothing trustworthy
            if apply and found and found[-1] == name:
                _unlink(item)
            continue
        if _is_folder(item):
            records = read_records(pool / f"{name}.rec")
            if records is None or records.state != "idle":
                found.append(name)
                if apply:
                    _discard(pool, name)
        else:
            found.append(name)
            if apply:
                _unlink(item)
    return found


def untrusted(pool: Path, *, apply: bool) -> list[str]:
    """What the pool holds that no trustworthy record describes (a give back or a placement killed half-way, a
    write cut short); apply discards it. Hold the worktrees lock."""
    return _sweep(pool, apply=apply) if _is_folder(pool) else []


def clear_idle(pool: Path, *, keep: int, apply: bool) -> list[str]:
    """The idle entries beyond the newest keep (by when each was given back); apply removes them. Placed entries
    are never touched. Hold the worktrees lock."""
    if not _is_folder(pool):
        return []
    idle = []
    for name in os.listdir(pool):
        if name.endswith(".rec"):
            records = read_records(pool / name)
            if records is not None and records.state == "idle" and _is_folder(pool / name[:-4]):
                idle.append((os.lstat(pool / name).st_mtime_ns, name[:-4]))
    going = [folder_id for _, folder_id in sorted(idle, reverse=True)[keep:]]
    if apply:
        for folder_id in going:
            _unlink(pool / f"{folder_id}.rec")  # unknown from here: a crash leaves it to the next sweep
            _remove(pool / folder_id)
    return going


def _idle_entry(pool: Path, own: str) -> tuple[str, Records] | None:
    """An idle entry, the one named own first: the placed records are named own, and the give back renames the
    folder to own, so an idle entry of that name must be the one taken, or its name would be taken twice."""
    for name in sorted(os.listdir(pool), key=lambda n: (n != f"{own}.rec", n)):
        if name.endswith(".rec"):
            records = read_records(pool / name)
            if records is not None and records.state == "idle" and _is_folder(pool / name[:-4]):
                return name[:-4], records
    return None


def _fresh_entry(common: Path, pool: Path, commit: str, tree: str) -> tuple[str, Records] | None:
    """A new checkout of commit in the pool, recorded idle."""

    folder_id = secrets.token_hex(12)
    folder = pool / folder_id
    written: list = []
    if not make_own_repository(common, folder, head=commit, commit=commit, branch=None, written=written):
        return None
    if any(mode == GITLINK for _, mode, _, _ in written):
        _discard(pool, folder_id)
        raise Unusable("a gitlink")  # submodules: the old way
    shutil.rmtree(folder / ".git")
    records = Records("idle", "", commit, tree, 0, 0)
    for name, mode, sha, st in written:
        records.files[name] = file_record(mode, sha.decode("ascii"), st)
    for name in _parents(records.files):
        records.folders[name] = folder_record(os.lstat(folder / os.fsdecode(name)))
    write_records(pool / f"{folder_id}.rec", records)
    return folder_id, records


def _tick(pool: Path, latest: int) -> int:
    """The file system's time once it is past latest (the last recorded ctime): a write after this can never
    share a recorded ctime. Immediate where timestamps are fine-grained; at most a clock tick elsewhere."""
    clock = os.fsencode(pool / ".clock")
    deadline = time.monotonic() + 1.0
    while True:
        os.utime(clock, follow_symlinks=False)
        now = os.lstat(clock).st_ctime_ns
        if now > latest or time.monotonic() > deadline:
            return now
        time.sleep(0.0005)


def _discard(pool: Path, folder_id: str) -> None:
    try:
        _remove(pool / folder_id)
    except OSError:
        pass  # the next sweep tries again
    _unlink(pool / f"{folder_id}.rec")
