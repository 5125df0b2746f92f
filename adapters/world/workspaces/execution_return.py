"""An execution checked and given back to its pool: observed after placing, inspected after its check, repaired."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from .execution_records import (
    EXECUTABLE, FILE, SYMLINK, Records, Scan, file_record, folder_record, read_records, same_content, scan,
    untracked_entries, write_records)
from ..faults import crash_point
from .execution_writes import Unusable, _Folders, _git_kept, _remove, _write_file_at
from .execution_pool import KEEP_IDLE, _discard, _entry_id, pool_of
from ..git.repository import read_text

__all__ = ["give_back", "inspect_placed", "observe_placed"]


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
    from dulwich.index import ConflictedIndexEntry, Index

    index = Index(str(index_path))
    staged = {}
    for name, entry in index.items():
        if isinstance(entry, ConflictedIndexEntry):
            return f"{name.decode(errors='replace')} has a merge conflict in the index"
        staged[name] = (entry.mode, entry.sha.decode("ascii"))
    expected = {name: (t[0], t[1]) for name, t in records.files.items()}
    if staged != expected:
        differing = sorted(set(staged.items()) ^ set(expected.items()))
        return f"the index differs from the commit at {os.fsdecode(differing[0][0])}"
    return None


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
