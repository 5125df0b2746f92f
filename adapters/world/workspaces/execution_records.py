"""What docket records of a pooled execution (execution_pool.py), kept outside it, and the comparison of an execution
with its records by lstat alone.

The records name, for every file, folder and ``.git`` entry: ino, ctime, size, mode (files: also the git mode and
blob id, and the stat data an index entry takes). ctime cannot be set by an unprivileged process: a file whose
(ino, ctime, size, mode) are as recorded, with one link and recorded before the marker (the file system's time once
every recorded write was done), has not been written since. Only what differs is read or listed.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["EXECUTABLE", "FILE", "GITLINK", "SYMLINK", "TREE", "Records", "Scan", "file_record", "folder_record",
           "read_records", "record_tree", "same_content", "scan", "untracked_entries", "write_records"]

_VERSION = 1
TREE, FILE, EXECUTABLE, SYMLINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000


@dataclass
class Records:
    state: str  # idle | placed
    path: str  # where placed ("" while idle)
    commit: str
    tree: str
    top_ino: int
    marker: int  # the file system's time after every recorded write: each recorded ctime is below it
    files: dict[bytes, tuple] = field(default_factory=dict)  # rel -> (git mode, hex sha, ino, ctime, size, st_mode,
    #                                                                   mtime, dev, uid, gid)
    folders: dict[bytes, tuple] = field(default_factory=dict)  # rel -> (ino, ctime, st_mode), top excluded
    git: dict[bytes, tuple] = field(default_factory=dict)  # rel under .git ("" is .git) -> (ino, ctime, size, mode)

    def dump(self) -> bytes:
        return marshal.dumps((_VERSION, self.state, self.path, self.commit, self.tree, self.top_ino, self.marker,
                              self.files, self.folders, self.git))

    @classmethod
    def load(cls, data: bytes) -> Records | None:
        try:
            value = marshal.loads(data)
            if not isinstance(value, tuple) or len(value) != 10 or value[0] != _VERSION:
                return None
            return cls(*value[1:])
        except (EOFError, ValueError, TypeError):
            return None


_cache: dict[str, tuple[tuple[int, int, int], Records]] = {}  # records file -> (its ino, mtime, size; records)


def _key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_records(file: Path) -> Records | None:
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        key = _key(os.fstat(fd))
        cached = _cache.get(str(file))
        if cached is not None and cached[0] == key:
            return cached[1]
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    records = Records.load(b"".join(chunks))
    if records is not None:
        _cache[str(file)] = (key, records)
    return records


def write_records(file: Path, records: Records) -> None:
    partial = file.with_name(f"{file.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(records.dump())
        while view:
            view = view[os.write(fd, view):]
        key = _key(os.fstat(fd))
    finally:
        os.close(fd)
    os.replace(partial, file)
    if len(_cache) > 64:
        _cache.clear()
    _cache[str(file)] = (key, records)


def file_record(mode: int, sha: str, st: os.stat_result) -> tuple:
    return (mode, sha, st.st_ino, st.st_ctime_ns, st.st_size, st.st_mode, st.st_mtime_ns, st.st_dev, st.st_uid,
            st.st_gid)


def folder_record(st: os.stat_result) -> tuple:
    return (st.st_ino, st.st_ctime_ns, st.st_mode)


def record_tree(root: Path) -> dict[bytes, tuple]:
    out: dict[bytes, tuple] = {}
    base = os.fsencode(root)

    def visit(rel: bytes) -> None:
        full = base + (b"/" + rel if rel else b"")
        st = os.lstat(full)
        out[rel] = (st.st_ino, st.st_ctime_ns, st.st_size, st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            for name in os.listdir(full):
                visit(rel + b"/" + name if rel else name)

    visit(b"")
    return out


@dataclass
class Scan:
    problem: str | None = None  # a folder replaced or gone, the top not the entry: not repairable
    dirty: list[bytes] = field(default_factory=list)  # tracked files whose stat is not as recorded (or gone)
    extra: list[bytes] = field(default_factory=list)  # entries no record names (untracked), top-most only
    changed_folders: list[bytes] = field(default_factory=list)
    git: str | None = None  # the first difference in .git


def scan(path: Path, records: Records, *, untracked: bool, git: bool, folders: bool = True) -> Scan:
    """Compare the folder at path with its records by lstat alone (no file read); untracked: list the folders whose
    ctime changed (and the top) for entries no record names; git: compare .git's entries too; folders: lstat every
    recorded folder (without, a folder replaced shows only through the files under it, which then differ)."""
    out = Scan()
    top = os.fsencode(path) + b"/"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        out.problem = f"nothing at {path}"
        return out
    if not stat.S_ISDIR(st.st_mode) or st.st_ino != records.top_ino:
        out.problem = f"{path} is not the folder docket placed"
        return out
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)  # names looked up from here:
    try:                                                                          # a shorter walk, no parent swapped
        if os.fstat(fd).st_ino != records.top_ino:
            out.problem = f"{path} is not the folder docket placed"
            return out
        _scan_below(fd, top, records, out, untracked=untracked, folders=folders)
    finally:
        os.close(fd)
    if git and out.problem is None:
        out.git = _git_difference(path, records)
    return out


def _scan_below(fd: int, top: bytes, records: Records, out: Scan, *, untracked: bool, folders: bool) -> None:
    marker, lstat = records.marker, os.lstat
    for name, (ino, ctime, mode) in records.folders.items() if folders else ():
        try:
            st = lstat(name, dir_fd=fd)
        except OSError:
            out.problem = f"folder {os.fsdecode(name)} was removed or cannot be read"
            return
        if st.st_ino != ino or not stat.S_ISDIR(st.st_mode):
            out.problem = f"folder {os.fsdecode(name)} was replaced"
            return
        if st.st_ctime_ns != ctime or st.st_mode != mode or ctime >= marker:
            out.changed_folders.append(name)
    out.dirty = _dirty_files(fd, records)
    if untracked:
        out.extra = untracked_entries(top, records, out.changed_folders)


def untracked_entries(top: bytes, records: Records, changed_folders: list[bytes]) -> list[bytes]:
    """What the top and the folders whose ctime moved hold that no record names (.git at the top aside): each name
    listed looked up in the records, so only the listed folders cost."""
    files, folders, extra = records.files, records.folders, []
    for folder in [b"", *changed_folders]:
        prefix = folder + b"/" if folder else b""
        for name in os.listdir(top + folder if folder else top):
            full = prefix + name
            if full not in files and full not in folders and not (not folder and name == b".git"):
                extra.append(full)
    return extra


_SPLIT = 2048  # files at and above which the lstat calls are split between this thread and another
_helper = None


def _dirty_files(fd: int, records: Records) -> list[bytes]:
    """The recorded files whose lstat is not as recorded (one link, the same ino, ctime, size and mode; none
    written at or after the marker) or that cannot be read. lstat releases the GIL: a large tree's files are
    split between two threads."""
    global _helper
    items = list(records.files.items())
    if len(items) < _SPLIT:
        return _compare(fd, items, records.marker)
    if _helper is None:
        from concurrent.futures import ThreadPoolExecutor

        _helper = ThreadPoolExecutor(1, thread_name_prefix="docket-pool-scan")
    half = len(items) // 2
    other = _helper.submit(_compare, fd, items[half:], records.marker)
    mine = _compare(fd, items[:half], records.marker)
    return mine + other.result()


def _compare(fd: int, items: list, marker: int) -> list[bytes]:
    lstat, dirty = os.lstat, []
    for name, record in items:
        try:
            st = lstat(name, dir_fd=fd)
        except OSError:
            dirty.append(name)
            continue
        if (st.st_ino != record[2] or st.st_ctime_ns != record[3] or st.st_size != record[4]
                or st.st_mode != record[5] or st.st_nlink != 1 or record[3] >= marker):
            dirty.append(name)
    return dirty


def _git_difference(path: Path, records: Records) -> str | None:
    try:
        now = record_tree(Path(path) / ".git")
    except OSError as e:
        return f".git cannot be read: {e}"
    for name in sorted(set(now) | set(records.git)):
        if name not in records.git:
            return f".git/{os.fsdecode(name)} appeared"
        if name not in now:
            return f".git/{os.fsdecode(name)} was removed"
        if now[name] != records.git[name] and name != b"":  # .git's own ctime moves with the entries checked here
            return f".git/{os.fsdecode(name)} was written"
        if records.git[name][1] >= records.marker:
            return f".git/{os.fsdecode(name)} cannot be told from a later write"
    return None


def same_content(path: Path, name: bytes, record: tuple) -> bool:
    """Whether the entry at path/name is a regular file or symlink with the recorded git mode and blob id (read
    without following a symlink; a symlinked parent folder makes it differ)."""
    full = os.fsencode(path) + b"/" + name
    try:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            data, mode = os.readlink(full), SYMLINK
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                data = f.read()
            mode = EXECUTABLE if st.st_mode & 0o100 else FILE
        else:
            return False
    except OSError:
        return False
    return (mode, hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()) == (record[0], record[1])
