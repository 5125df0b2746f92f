"""Writes into a pool entry that never follow a symlink: an entry brought to a tree, its files, `.git` and index."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path

from .execution_records import EXECUTABLE, FILE, GITLINK, SYMLINK, Records, file_record, folder_record, record_tree
from ..git.ids import object_id
from ..git.own_repositories import _read_exclude, make_git_dir
import struct


class Unusable(Exception):
    """The pool cannot make this execution (a gitlink in the tree, an unreadable object): make it the old way."""


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
        changes = list(tree_changes(store, object_id(records.tree), object_id(tree)))
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
