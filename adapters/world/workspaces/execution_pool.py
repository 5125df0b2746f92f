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

from .execution_records import (EXECUTABLE, FILE, GITLINK, SYMLINK, Records, Scan, file_record, folder_record,
                                read_records, record_tree, same_content, scan, untracked_entries, write_records)
from ..faults import crash_point

__all__ = ["KEEP_IDLE", "POOL", "Records", "clear_idle", "discard_records", "give_back", "idle_only", "inspect_placed",
           "observe_placed", "place", "pool_of", "records_of", "remnant", "sweep", "untrusted"]

POOL = ".pool"
KEEP_IDLE = 4  # idle entries kept per repository; more given back are removed


class Unusable(Exception):
    """The pool cannot make this execution (a gitlink in the tree, an unreadable object): make it the old way."""


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
            tree = user[commit.encode("ascii")].tree.decode("ascii")
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
    from ..git.own_repositories import make_own_repository

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


def _parents(files: dict[bytes, tuple]) -> list[bytes]:
    """Every folder (below the top) holding one of files, parents before children."""
    found: set[bytes] = set()
    for name in files:
        cut = name.rfind(b"/")
        while cut > 0:
            parent = name[:cut]
            if parent in found:
                break
            found.add(parent)
            cut = parent.rfind(b"/")
    return sorted(found, key=lambda p: (p.count(b"/"), p))


def _bring(store, folder: Path, records: Records, tree: str) -> None:  # noqa: ANN001
    """The folder (holding records.tree exactly, as recorded) made to hold tree: only the paths that differ
    unlinked and written anew; records updated."""
    from dulwich.diff_tree import tree_changes
    from dulwich.index import InvalidPathError, validate_path_element_default

    if records.tree == tree:
        return
    removed: list[bytes] = []
    wanted: list[tuple[bytes, int, bytes]] = []
    try:
        changes = list(tree_changes(store, records.tree.encode("ascii"), tree.encode("ascii")))
    except KeyError as e:  # the tree the entry last held is gone (a killed integration's merge, pruned since)
        raise Unusable(f"an object of the trees to compare is missing: {e}") from None
    for change in changes:
        if change.old is not None and change.old.path is not None:
            removed.append(change.old.path)
        if change.new is not None and change.new.path is not None:
            if change.new.mode == GITLINK:
                raise Unusable("a gitlink")
            for part in change.new.path.split(b"/"):
                if not validate_path_element_default(part) or part.lower() == b".git":
                    raise InvalidPathError(change.new.path)
            wanted.append((change.new.path, change.new.mode, change.new.sha))
    touched: set[bytes] = set()  # folders whose entries changed
    with _Folders(folder) as at:  # every write through a folder opened here, never through a symlink
        try:
            for name in removed:
                fd, leaf = at.parent(name)
                _unlink_at(fd, leaf)
                records.files.pop(name, None)
                touched.add(name.rpartition(b"/")[0])
            for name in _folders_emptied(records, removed, wanted):
                fd, leaf = at.parent(name)
                at.forget(name)
                os.rmdir(leaf, dir_fd=fd)  # emptied by the removals (a file of the new tree may take its name)
                del records.folders[name]
                touched.add(name.rpartition(b"/")[0])
            for name in sorted(_parents({n: () for n, _, _ in wanted}), key=lambda p: p.count(b"/")):
                if name not in records.folders:
                    fd, leaf = at.parent(name)
                    os.mkdir(leaf, dir_fd=fd)
                    records.folders[name] = ()
                    touched.add(name.rpartition(b"/")[0])
            for name, mode, sha in wanted:
                try:
                    data = store[sha].as_raw_string()
                except Exception as e:  # noqa: BLE001  (too large for dulwich, or missing: the old way says which)
                    raise Unusable(str(e)) from e
                kind = SYMLINK if stat.S_ISLNK(mode) else EXECUTABLE if mode & 0o100 else FILE
                fd, leaf = at.parent(name)
                records.files[name] = file_record(kind, sha.decode("ascii"), _write_file_at(fd, leaf, kind, data))
                touched.add(name.rpartition(b"/")[0])
            for name in touched:
                if name in records.folders:
                    records.folders[name] = folder_record(os.fstat(at.fd(name)))
        except OSError as e:  # a folder that is not the recorded one (a symlink, a file): the entry is not used
            raise Unusable(f"the entry cannot be brought: {e}") from None


def _folders_emptied(records: Records, removed: list[bytes], wanted: list[tuple[bytes, int, bytes]]) -> list[bytes]:
    """The recorded folders that hold nothing once removed are gone and wanted written, deepest first: only the
    parents of removed files can have emptied (records.files no longer names the removed)."""
    candidates = set(_parents({name: () for name in removed}))
    if not candidates:
        return []
    holding = {name.rpartition(b"/")[0] for name in records.files}
    holding |= {name.rpartition(b"/")[0] for name, _, _ in wanted} | set(_parents({n: () for n, _, _ in wanted}))
    holding |= {name.rpartition(b"/")[0] for name in records.folders if name not in candidates}
    emptied = []
    for name in sorted(candidates, key=lambda p: -p.count(b"/")):
        if name in records.folders and name not in holding:
            emptied.append(name)
        else:
            holding.add(name.rpartition(b"/")[0])
    return emptied


class _Folders:
    """Folders of an entry opened one name at a time from its top (O_PATH, never following a symlink): a folder a
    process swapped for a symlink cannot lead a write outside the entry."""

    _FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, folder: Path) -> None:
        self.fds: dict[bytes, int] = {b"": os.open(folder, self._FLAGS)}

    def __enter__(self) -> "_Folders":
        return self

    def __exit__(self, *_: object) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def fd(self, rel: bytes) -> int:
        fd = self.fds.get(rel)
        if fd is None:
            parent, _, leaf = rel.rpartition(b"/")
            fd = self.fds[rel] = os.open(leaf, self._FLAGS, dir_fd=self.fd(parent))
        return fd

    def parent(self, name: bytes) -> tuple[int, bytes]:
        parent, _, leaf = name.rpartition(b"/")
        return self.fd(parent), leaf

    def forget(self, rel: bytes) -> None:
        for name in [n for n in self.fds if n == rel or n.startswith(rel + b"/")]:
            os.close(self.fds.pop(name))


def _unlink_at(fd: int, leaf: bytes) -> None:
    try:
        os.unlink(leaf, dir_fd=fd)
    except FileNotFoundError:
        pass


def _write_file_at(fd: int, leaf: bytes, kind: int, data: bytes) -> os.stat_result:
    if kind == SYMLINK:
        os.symlink(data, leaf, dir_fd=fd)
        return os.lstat(leaf, dir_fd=fd)
    out = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o777 if kind == EXECUTABLE else 0o666, dir_fd=fd)
    try:
        _write_all(out, data)
        return os.fstat(out)
    finally:
        os.close(out)


def _write_git(common: Path, store, folder: Path, commit: str, records: Records) -> None:  # noqa: ANN001
    """The own repository's git dir detached at commit, its index from the records; every entry of it recorded.
    The ``.git`` the entry kept (exactly as recorded: docket wrote each entry and nothing wrote it since) has only
    HEAD, the index and, when the user's changed, info/exclude replaced; any other is removed and made afresh."""
    from ..git.own_repositories import _read_exclude, make_git_dir

    git = folder / ".git"
    if _git_kept(folder, records):
        try:
            with _Folders(folder) as at:  # written through folders opened here: a swapped .git is never followed
                if os.fstat(at.fd(b".git")).st_ino != records.git[b""][0]:
                    raise OSError(f"{git} is not the recorded folder")
                _replace_at(at.fd(b".git"), b"HEAD", f"{commit}\n".encode("ascii"))
                _replace_at(at.fd(b".git"), b"index", _index_bytes(records))
                exclude = _read_exclude(Path(common) / "info" / "exclude").encode("utf-8")
                if _read_at(at.fd(b".git/info"), b"exclude") != exclude:
                    _replace_at(at.fd(b".git/info"), b"exclude", exclude)
            records.git = record_tree(git)
            return
        except OSError:
            pass  # made afresh below
    if os.path.lexists(git):
        _remove(git)
    make_git_dir(common, git, head=commit, commit=commit, branch=None, store=store, keep=False)
    _write_index(git / "index", records)
    records.git = record_tree(git)


def _git_kept(folder: Path, records: Records) -> bool:
    """Whether the entry's ``.git`` is exactly as recorded (every entry's ino, ctime, size and mode, none added or
    removed, each recorded before the marker): nothing has written it since docket did."""
    if not records.git:
        return False
    try:
        now = record_tree(folder / ".git")
    except OSError:
        return False
    return now == records.git and all(t[1] < records.marker for t in records.git.values())


def _replace_at(fd: int, leaf: bytes, data: bytes) -> None:
    partial = leaf + b"." + secrets.token_hex(4).encode("ascii") + b".tmp"
    out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
    try:
        _write_all(out, data)
    finally:
        os.close(out)
    os.replace(partial, leaf, src_dir_fd=fd, dst_dir_fd=fd)


def _read_at(fd: int, leaf: bytes) -> bytes | None:
    try:
        opened = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(opened, "rb") as f:
        return f.read(1 << 21)


_entries: dict[tuple[bytes, tuple], bytes] = {}  # (path, record) -> its index entry, packed


def _index_bytes(records: Records) -> bytes:
    """A version 2 index of the records' files, each with its recorded stat data (own_repositories.write_index,
    each entry packed once and reused while its record is unchanged)."""
    import struct

    if len(_entries) > 200_000:
        _entries.clear()
    mask = 0xFFFFFFFF
    parts = [b"DIRC", struct.pack(">LL", 2, len(records.files))]
    for name in sorted(records.files):
        record = records.files[name]
        entry = _entries.get((name, record))
        if entry is None:
            mode, sha, ino, ctime, size, _, mtime, dev, uid, gid = record
            head = struct.pack(">LLLLLLLLLL", (ctime // 1_000_000_000) & mask, ctime % 1_000_000_000,
                               (mtime // 1_000_000_000) & mask, mtime % 1_000_000_000, dev & mask, ino & mask, mode,
                               uid & mask, gid & mask, size & mask)
            entry = head + bytes.fromhex(sha) + struct.pack(">H", min(len(name), 0xFFF)) + name
            entry = _entries[(name, record)] = entry + b"\0" * (8 - len(entry) % 8)
        parts.append(entry)
    body = b"".join(parts)
    return body + hashlib.sha1(body).digest()


def _write_index(path: Path, records: Records) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, _index_bytes(records))
    finally:
        os.close(fd)


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


# Observe and inspect ---------------------------------------------------------------------------------------------


def observe_placed(path: Path, records: Records, commit: str) -> str | None:
    """None when the placed entry at path is exactly commit with nothing untracked (compared by stat with its
    records; a file whose stat moved, by its content), else what differs."""
    if records.commit != commit:
        return f"the execution at {path} holds {records.commit}, not {commit}"
    found = scan(path, records, untracked=True, git=True)
    if found.problem:
        return found.problem
    if found.git:
        return found.git
    for name in found.dirty:
        if not same_content(path, name, records.files[name]):
            return f"tracked {os.fsdecode(name)} was changed"
    if found.extra:
        return f"untracked {os.fsdecode(found.extra[0])} appeared"
    return None


def inspect_placed(repo, path: Path, records: Records, commit: str) -> str | None:  # noqa: ANN001
    """After a check: None when HEAD, the index and every tracked file are still the commit's (compared by stat,
    a file whose stat moved by its content), else what changed. Untracked files are the check's own output."""
    from ..git.repository import read_text

    head = read_text(Path(path) / ".git" / "HEAD")
    if head != commit:
        return f"HEAD is {head}, not detached at {commit}"
    found = scan(path, records, untracked=False, git=False)  # folders too: a folder renamed away and a symlink
    if found.problem and "replaced" not in found.problem:  # put in its place leaves its files' stat as it was
        return found.problem
    if found.problem:  # a folder replaced: every file is compared by content, then where it lies
        found.dirty = list(records.files)
    for name in found.dirty:
        if not same_content(path, name, records.files[name]):
            return f"tracked {os.fsdecode(name)} was changed"
    replaced = _replaced_folder(path, records, found.dirty)
    if replaced is not None:
        return f"folder {os.fsdecode(replaced)} was replaced by a symlink or a file"
    index = records.git.get(b"index")
    try:
        st = os.lstat(Path(path) / ".git" / "index")
    except FileNotFoundError:
        return "the worktree has no index"
    if index is None or (st.st_ino, st.st_ctime_ns, st.st_size, st.st_mode) != index:
        difference = _index_difference(Path(path) / ".git" / "index", records)
        if difference is not None:
            return difference
    if not found.problem:
        _remember_inspection(path, records, found)
    return None


_inspections: dict[str, tuple[tuple[int, int, str], Scan]] = {}  # path -> (its placement; its matching scan)


def _placement(records: Records) -> tuple[int, int, str]:
    return (records.top_ino, records.marker, records.commit)  # the marker is the file system's time: one placement


def _remember_inspection(path: Path, records: Records, found: Scan) -> None:
    if len(_inspections) > 64:
        _inspections.clear()
    _inspections[str(path)] = (_placement(records), Scan(dirty=list(found.dirty),
                                                          changed_folders=list(found.changed_folders)))


def _inspection_of(path: Path, records: Records) -> Scan | None:
    """The scan of this placement's matching inspection in this process, once (None: none, or another placement)."""
    remembered = _inspections.pop(str(path), None)
    if remembered is None or remembered[0] != _placement(records):
        return None
    return remembered[1]


def _replaced_folder(path: Path, records: Records, dirty: list[bytes]) -> bytes | None:
    """The first folder above one of the files that is no longer a real folder."""
    top = os.fsencode(path) + b"/"
    seen: set[bytes] = set()
    for name in dirty:
        parent = name.rpartition(b"/")[0]
        while parent and parent not in seen:
            seen.add(parent)
            try:
                if not stat.S_ISDIR(os.lstat(top + parent).st_mode):
                    return parent
            except OSError:
                return parent
            parent = parent.rpartition(b"/")[0]
    return None


def _index_difference(index_path: Path, records: Records) -> str | None:
    from dulwich.index import Index

    index = Index(str(index_path))
    staged = {}
    for name, entry in index.items():
        if not hasattr(entry, "sha"):
            return f"{name.decode(errors='replace')} has a merge conflict in the index"
        staged[name] = (entry.mode, entry.sha.decode("ascii"))
    expected = {name: (t[0], t[1]) for name, t in records.files.items()}
    if staged != expected:
        differing = sorted(set(staged.items()) ^ set(expected.items()))
        return f"the index differs from the commit at {os.fsdecode(differing[0][0])}"
    return None


# Give back -------------------------------------------------------------------------------------------------------


def give_back(common: Path, path: Path, records: Records) -> None:
    """The placed entry at path back in the pool (its check's process group gone; hold the worktrees lock): path
    is free at once; the folder is made to hold records.tree exactly again, or discarded."""
    from dulwich.repo import Repo

    pool = pool_of(path)
    folder_id = _entry_id(path)
    folder = pool / folder_id
    inspected = _inspection_of(path, records)
    idle = sum(1 for name in os.listdir(pool) if name.endswith(".rec") and name != f"{folder_id}.rec"
               and (read_records(pool / name) or records).state == "idle")
    if os.path.lexists(folder):  # nothing trustworthy: the records of that name say placed, at path
        _remove(folder)
    os.rename(path, folder)  # the execution is gone from its path; the records say placed: unknown until rewritten
    crash_point("execution-pool:after-give-back")
    try:
        if idle >= KEEP_IDLE:
            raise Unusable("the pool is full")
        _repair(common, folder, records, inspected)
    except Unusable:
        _discard(pool, folder_id)
        return
    except BaseException:
        _discard(pool, folder_id)
        raise
    records.state, records.path = "idle", ""
    write_records(pool / f"{folder_id}.rec", records)


def _repair(common: Path, folder: Path, records: Records, inspected: Scan | None = None) -> None:
    """The folder made to hold records.tree exactly again (records updated); Unusable when it cannot be.

    inspected: the scan of this placement's inspection, which found it matching; used instead of scanning again
    (see the module's docstring: what changed since is seen by the next placement's observation)."""
    from dulwich.repo import Repo

    os.chmod(folder, 0o700, follow_symlinks=False)
    top = os.fsencode(folder) + b"/"
    found = inspected if inspected is not None else scan(folder, records, untracked=False, git=False)
    modes = [name for name in found.changed_folders if os.lstat(top + name).st_mode != records.folders[name][2]]
    for name in modes:  # what a check made unreadable or unwritable is read and repaired again
        os.chmod(top + name, stat.S_IMODE(records.folders[name][2]), follow_symlinks=False)
    if modes or found.problem:
        found = scan(folder, records, untracked=True, git=False)
    else:
        found.extra = untracked_entries(top, records, found.changed_folders)
    if found.problem:
        raise Unusable(found.problem)
    if not _git_kept(folder, records):  # kept as recorded: the next placement replaces only HEAD and the index
        _remove(folder / ".git")
        records.git = {}
    touched = {name.rpartition(b"/")[0] for name in found.extra}
    with _Folders(folder) as at:  # every write through a folder opened here, never through a symlink
        try:
            for name in found.extra:
                fd, leaf = at.parent(name)
                if stat.S_ISDIR(os.lstat(leaf, dir_fd=fd).st_mode):
                    shutil.rmtree(leaf, dir_fd=fd)  # fd-based: a symlink inside is removed, never followed
                else:
                    os.unlink(leaf, dir_fd=fd)
            if found.dirty:
                with Repo(str(common)) as user:
                    for name in found.dirty:
                        record = records.files[name]
                        fd, leaf = at.parent(name)
                        st = _verified_at(fd, leaf, record)
                        if st is not None and st.st_nlink == 1:
                            records.files[name] = file_record(record[0], record[1], st)
                            continue
                        _remove_at(fd, leaf)
                        try:
                            data = user.object_store[record[1].encode("ascii")].as_raw_string()
                        except Exception as e:  # noqa: BLE001  (too large for dulwich, or pruned: discarded)
                            raise Unusable(str(e)) from e
                        records.files[name] = file_record(record[0], record[1],
                                                          _write_file_at(fd, leaf, record[0], data))
                        touched.add(name.rpartition(b"/")[0])
            for name in {*touched, *found.changed_folders}:
                if name:
                    records.folders[name] = folder_record(os.fstat(at.fd(name)))
        except OSError as e:  # what a check left that cannot be undone here (an unwritable folder in what it
            raise Unusable(f"the entry cannot be repaired: {e}") from None  # added, a folder swapped): discarded


def _verified_at(fd: int, leaf: bytes, record: tuple) -> os.stat_result | None:
    """The stat of the entry leaf in the folder fd when its content is the record's mode and blob (the stat taken
    of what was read, so a swap between the two cannot pair one file's stat with another's content); else None."""
    try:
        before = os.lstat(leaf, dir_fd=fd)
        if stat.S_ISLNK(before.st_mode):
            data, mode = os.readlink(leaf, dir_fd=fd), SYMLINK
            st = os.lstat(leaf, dir_fd=fd)
            if (st.st_ino, st.st_ctime_ns) != (before.st_ino, before.st_ctime_ns):
                return None
        elif stat.S_ISREG(before.st_mode):
            opened = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            with os.fdopen(opened, "rb") as f:
                st = os.fstat(f.fileno())
                data = f.read()
                if os.fstat(f.fileno()).st_ctime_ns != st.st_ctime_ns:
                    return None  # written while read
            mode = EXECUTABLE if st.st_mode & 0o100 else FILE
        else:
            return None
    except OSError:
        return None
    if (mode, hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()) != (record[0], record[1]):
        return None
    return st


def _remove_at(fd: int, leaf: bytes) -> None:
    try:
        st = os.lstat(leaf, dir_fd=fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(leaf, dir_fd=fd)
    else:
        os.unlink(leaf, dir_fd=fd)


def _discard(pool: Path, folder_id: str) -> None:
    try:
        _remove(pool / folder_id)
    except OSError:
        pass  # the next sweep tries again
    _unlink(pool / f"{folder_id}.rec")


# Small helpers -------------------------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _unlink(path) -> None:  # noqa: ANN001
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove(path: Path) -> None:
    _remove_bytes(os.fsencode(path))


def _remove_bytes(path: bytes) -> None:
    """Whatever is at path removed, never following a symlink (a folder's read-only modes undone first)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    os.chmod(path, 0o700, follow_symlinks=False)

    def writable(function, failed, _) -> None:  # noqa: ANN001
        parent = os.path.dirname(failed)
        os.chmod(parent, 0o700, follow_symlinks=False)
        function(failed)

    for folder, names, _ in os.walk(path):  # folders a check made unwritable or unlistable
        for name in names:
            full = os.path.join(folder, name)
            if not os.path.islink(full):
                os.chmod(full, 0o700, follow_symlinks=False)
    shutil.rmtree(path, onerror=writable)
