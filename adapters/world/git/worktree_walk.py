"""Walking a worktree for a capture: its files hashed (or found unchanged in the cache), ignored ones left out."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from pathlib import Path

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import BadInput, Refused
from ....domain.containment.processes import safe_text
from .flat_trees import MAX_TREE_DEPTH, remember_tree, too_deep, unsafe_name, unsafe_path
from ..files.regular_files import NotRegular, open_regular
from .size_limit import SizeLimit, large_file_id
from .stat_cache import StatCache
from .objects import add_object


TREE, FILE, EXECUTABLE, SYMLINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000
_Entry = tuple[int, bytes]  # (git mode, blob id as 40 hex bytes)
HELD_BYTES = 64 << 20  # the content of files hashed before their blobs may be written, held rather than read again
_PENDING: _Entry = (0, b"")  # a file listed, not read yet: no entry of HEAD's is this


class _Walk:
    """The files and symlinks of a worktree that belong in its capture, hashed (or found unchanged in the cache)."""

    def __init__(self, root: Path, store, tracked: dict[bytes, _Entry], tracked_folders: set[bytes],  # noqa: ANN001
                 artifact: bytes | None, ignores, cache: StatCache, large: SizeLimit) -> None:  # noqa: ANN001
        self.root = os.fsencode(root)
        self.store = store
        self.tracked = tracked
        self.tracked_folders = tracked_folders
        self.artifact = artifact
        self.ignores = ignores
        self.large = large
        self.cache, self.cache_written_ns = cache.records, cache.written_ns
        self.found: dict[bytes, _Entry] = {}
        self.stats: dict[bytes, bytes] = {}  # path -> its stat cache record
        self.hashed = 0  # files and symlinks read (not taken from the cache)
        self.write_all = False  # write HEAD's blobs too (where the store lacks them)
        self.pending: list[tuple[bytes, int, bytes, int]] = []  # (path, mode, stat key, size) to read and hash
        self.unwritten: list[tuple[bytes, bytes]] = []  # (path, blob id) hashed, to be written
        self.held: dict[bytes, bytes] = {}  # path -> the content of an unwritten blob, while HELD_BYTES allow
        self.held_bytes = 0
        self.watched_paths: tuple[frozenset[bytes], set[bytes], list[bytes]] | None = None

    def folder(self, rel: bytes) -> None:
        """The folder's files and symlinks, then its subfolders; a folder holding a ``.git`` (a nested repository,
        rel not the top) is left out whole. A folder's own kind is read from the listing (no stat call); every
        other entry is lstat'ed, as its stat cache record needs."""
        prefix, tracked, found = (rel + b"/" if rel else b""), self.tracked, self.found
        folders: list[bytes] = []
        files: list[tuple[bytes, os.stat_result]] = []
        where = self.root + b"/" + rel if rel else self.root
        try:
            with os.scandir(where) as listing:
                for e in listing:
                    name = e.name
                    if name == b".git":
                        if rel:
                            return  # a nested repository: never entered
                        continue
                    if len(name) == 4 and rel and name.lower() == b".git" and os.path.lexists(where + b"/.git"):
                        return  # the same, where the file system ignores case
                    if unsafe_name(name):  # '.GIT' and the like: no checkout of the candidate could write it
                        raise unsafe_path(prefix + name)
                    if e.is_dir(follow_symlinks=False):
                        folders.append(name)
                    else:
                        files.append((name, e.stat(follow_symlinks=False)))
        except OSError as e:
            if rel and os.path.lexists(where + b"/.git"):
                return  # a nested repository that cannot be listed: never entered either
            raise self._unreadable(rel, e) from None
        entry = self._entry
        for name, st in files:
            if entry(prefix + name, st):  # it became a folder after it was listed
                folders.append(name)
        for name in folders:
            self._subfolder(prefix + name)

    def _entry(self, path: bytes, st: os.stat_result) -> bool:
        """Take the file or symlink at path (its lstat st) into found when it belongs in the capture; whether it is
        a folder (left to the caller)."""
        st_mode = st.st_mode
        kind = stat.S_IFMT(st_mode)
        if kind == stat.S_IFDIR:
            return True
        if (kind == stat.S_IFREG or kind == stat.S_IFLNK) and (path in self.tracked or self._wanted(path)):
            mode = SYMLINK if kind == stat.S_IFLNK else EXECUTABLE if st_mode & stat.S_IXUSR else FILE
            key = b"%d %d %d %d %d %d " % (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st_mode, mode)
            record = self.cache.get(path)  # as cached, unless it was racily clean when cached
            if record is not None and len(record) == len(key) + 40 and record.startswith(key) and \
                    st.st_mtime_ns < self.cache_written_ns:
                self.stats[path] = record
                self.found[path] = (mode, record[len(key):])
                if kind == stat.S_IFREG and st.st_size > self.large.limit:
                    self.large.require_base_holds(path, self.found[path][1], st.st_size)
            else:  # read later (hash_pending), once what changes is known to be recordable
                self.found[path] = _PENDING
                self.pending.append((path, mode, key, st.st_size if kind == stat.S_IFREG else 0))
        return False

    def bounds(self, moved: set[bytes] | None) -> tuple[list[bytes], list[bytes]]:
        """Before any file is read: the paths that may change against the base, and those that surely do. A new
        file surely changes, a file of HEAD's not read yet may; moved: the paths HEAD changes against the base (None:
        HEAD's tree is the base's), which may change or not whatever the worktree holds."""
        changes = self.changes()
        maybe = {path for path, _, _, _ in self.pending if path in self.tracked}
        if moved is None:
            return list(changes), [p for p in changes if p not in maybe]
        return list(moved.union(changes)), [p for p in changes if p not in maybe and p not in moved]

    def hash_pending(self, *, write: bool) -> None:
        """Read and hash the files the walk left pending, the ones over the size limit first (hashed a chunk at a
        time, never written: a refusal comes before any blob is written). write: write each blob as it is read;
        else leave it to write_unwritten, its content held meanwhile while HELD_BYTES allow."""
        limit = self.large.limit
        for path, mode, key, size in sorted(self.pending, key=lambda pending: pending[3] <= limit):
            self.found[path] = self._hashed(path, mode, key, size, write)
        self.pending = []

    def write_unwritten(self) -> bool:
        """Write the blobs hash_pending left unwritten, reading again what was not held; whether a file read again
        had changed since it was hashed (its entry is then what was read, and written)."""
        changed = False
        for path, sha in self.unwritten:
            data = self.held.pop(path, None)
            if data is None:
                mode = self.found[path][0]
                data = self._read(path, mode)
                again = _blob_id(data)
                if again != sha:
                    if mode != SYMLINK and len(data) > self.large.limit:
                        self.large.require_base_holds(path, again, len(data))
                    changed = True
                    self.found[path] = (mode, again)
                    self.stats.pop(path, None)  # read after it was stat'ed: hashed again next time
            _write_blob(self.store, data)
        self.unwritten, self.held_bytes = [], 0
        return changed

    def changes(self) -> dict[bytes, _Entry | None]:
        """What differs from the tracked entries (a pending file counted as differing)."""
        tracked, found = self.tracked, self.found
        changes: dict[bytes, _Entry | None] = {p: e for p, e in found.items() if tracked.get(p) != e}
        if self.watched_paths is None:
            changes.update((p, None) for p in tracked if p not in found)
            return changes
        dirty, covered, outer = self.watched_paths
        changes.update((p, None) for p in dirty if p in tracked and p not in found and not _under(p, covered))
        if any(r in self.tracked_folders or r in tracked for r in outer):  # entries of HEAD's under them may be gone
            changes.update((p, None) for p in tracked if p not in found and _under(p, covered))
        return changes

    def watched(self, dirty: frozenset[bytes], rewalk: frozenset[bytes]) -> None:
        """Walk only what the watch reported, when the workspace held exactly the tracked entries when its watch
        began and the watch reported dirty (paths to look at again) and rewalk (folders to walk whole) since
        (change_watch.py): changes() then gives the same answer as after a walk of the whole worktree."""
        roots = sorted(rewalk)
        outer = [r for i, r in enumerate(roots) if not any(_inside(r, o) for o in roots[:i])]
        for folder in outer:
            self._again(folder)
        covered = set(outer)
        for path in sorted(dirty):
            if not _under(path, covered):
                self._again(path)
        self.watched_paths = (dirty, covered, outer)

    def _again(self, path: bytes) -> None:
        """Look at path again, as the walk of its folder would: a folder is walked whole, a file or symlink taken,
        anything gone or else left out. Its folder must be one the walk enters (a folder of HEAD's, unmoved)."""
        if any(part != b".git" and unsafe_name(part) for part in path.split(b"/")):  # as the walk's listing refuses
            raise unsafe_path(path)
        try:
            st = os.lstat(self.root + b"/" + path)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as e:
            raise self._unreadable(path, e) from None
        if self._entry(path, st):
            self._subfolder(path)

    def _unreadable(self, path: bytes, e: OSError) -> Refused:
        """A file or folder that cannot be read (permissions, or changed under the walk): the worktree is unreadable.

        A failure to write objects is an I/O failure, and propagates as it is.
        """
        where = safe_text(f"{os.fsdecode(path) or '.'} in {os.fsdecode(self.root)}")  # an agent's name: any bytes
        if isinstance(e, NotRegular):  # swapped for a FIFO or a device after it was listed: never read
            return Refused(Code.WORKTREE_NOT_REGULAR, f"{where} was a file when listed and is not one when read (a "
                                                      "FIFO, a device?); nothing was pinned")
        return Refused(Code.WORKTREE_UNREADABLE, f"cannot read {where}: {e.strerror}")

    def _subfolder(self, path: bytes) -> None:
        if self.tracked.get(path, (0,))[0] == GITLINK:  # a submodule keeps the commit HEAD records
            self.found[path] = self.tracked[path]
            return
        if path not in self.tracked_folders:
            if self._under_artifact(path) or self.ignores.may_prune_directory(os.fsdecode(path)):
                return
        if path.count(b"/") >= MAX_TREE_DEPTH:  # the walk recurses a frame or two a folder: refused, never overflown
            raise too_deep(path)
        self.folder(path)

    def _wanted(self, path: bytes) -> bool:
        return not self._under_artifact(path) and not self.ignores.is_ignored(os.fsdecode(path))

    def _under_artifact(self, path: bytes) -> bool:
        a = self.artifact
        return a is not None and (path == a or path.startswith(a + b"/"))

    def _hashed(self, path: bytes, mode: int, key: bytes, size: int, write: bool) -> _Entry:
        """The entry of a file or symlink read and hashed (its blob written when HEAD lacks it, or left unwritten);
        its stat record. A file over the size limit is hashed a chunk at a time and never written: the base must
        hold it."""
        self.hashed += 1
        absolute = self.root + b"/" + path
        if size > self.large.limit:
            try:
                sha = large_file_id(absolute, size)
            except OSError as e:
                raise self._unreadable(path, e) from None
            except ValueError as e:
                raise Refused(Code.WORKTREE_UNREADABLE, f"{os.fsdecode(path)} in {os.fsdecode(self.root)} {e}") from None
            self.large.require_base_holds(path, sha, size)
            self.stats[path] = key + sha
            return mode, sha
        data = self._read(path, mode)
        sha = _blob_id(data)
        if self.write_all or self.tracked.get(path, (0, b""))[1] != sha:  # HEAD's blobs are in the store already
            if write:
                _write_blob(self.store, data)
            else:
                self.unwritten.append((path, sha))
                if self.held_bytes + len(data) <= HELD_BYTES:
                    self.held[path] = data
                    self.held_bytes += len(data)
        self.stats[path] = key + sha
        return mode, sha

    def _read(self, path: bytes, mode: int) -> bytes:
        try:
            return os.readlink(self.root + b"/" + path) if mode == SYMLINK else _read_file(self.root + b"/" + path)
        except OSError as e:
            raise self._unreadable(path, e) from None


def _inside(path: bytes, folder: bytes) -> bool:
    return path.startswith(folder + b"/")


def _under(path: bytes, folders: set[bytes]) -> bool:
    """Whether path is one of folders or lies under one."""
    if not folders:
        return False
    if path in folders:
        return True
    cut = path.rfind(b"/")
    while cut > 0:
        if path[:cut] in folders:
            return True
        cut = path.rfind(b"/", 0, cut)
    return False


def _blob_id(data: bytes) -> bytes:
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest().encode("ascii")


def _read_file(path: bytes) -> bytes:
    fd = open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _ignores(repo):  # noqa: ANN001, ANN202
    """The ignore rules git applies in this worktree: its .gitignore files, info/exclude of the common git dir (not
    the worktree's), and the excludes file of the user's own configuration. Never the excludes file the workspace's
    config names: that is the agent's to write, and could name ~/.ssh/id_rsa, /dev/zero or a FIFO. Every file is
    opened as open_regular does; one that is not a regular file counts as absent."""
    from dulwich.config import StackedConfig
    from dulwich.ignore import IgnoreFilter, default_user_ignore_filter_path

    ignorecase = repo.get_config_stack().get_boolean(b"core", b"ignorecase", False)
    users = default_user_ignore_filter_path(StackedConfig(StackedConfig.default_backends()))
    filters = []
    for path in (os.path.join(repo.commondir(), "info", "exclude"), os.path.expanduser(users)):
        patterns = _ignore_patterns(path)
        if patterns is not None:
            filters.append(IgnoreFilter(patterns, ignorecase, path=path))
    return _regular_ignores_class()(repo.path, filters, ignorecase)


def _ignore_patterns(path: str) -> list[bytes] | None:
    """The patterns of the ignore file at path, read as open_regular does; None when it is absent or not a file."""
    from dulwich.ignore import read_ignore_patterns

    try:
        fd = open_regular(path)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return list(read_ignore_patterns(f))


@functools.cache
def _regular_ignores_class():  # noqa: ANN202  (made on first use: dulwich is imported late, as everywhere here)
    from dulwich.ignore import IgnoreFilter, IgnoreFilterManager

    class RegularIgnores(IgnoreFilterManager):
        """dulwich's manager, its .gitignore files read as open_regular does (dulwich opens without O_NONBLOCK: a
        FIFO named .gitignore in the workspace would block the capture forever)."""

        def _load_path(self, path: str):  # noqa: ANN202
            if path not in self._path_filters:
                where = os.path.join(self._top_path, path, ".gitignore")
                patterns = _ignore_patterns(where)
                self._path_filters[path] = None if patterns is None else \
                    IgnoreFilter(patterns, self._ignorecase, path=where)
            return self._path_filters[path]

    return RegularIgnores


def _artifact_prefix(artifact_dir: str | None) -> bytes | None:
    if artifact_dir is None:
        return None
    normal = os.path.normpath(artifact_dir)
    if os.path.isabs(normal) or normal == ".." or normal.startswith("../") or normal == ".":
        raise BadInput(Code.BAD_ARTIFACT_DIR, f"the artifact directory {artifact_dir!r} is not inside the worktree")
    return os.fsencode(normal)


def _write_blob(store, data: bytes) -> bytes:  # noqa: ANN001
    from dulwich.objects import Blob

    blob = Blob.from_string(data)
    return _write(store, blob)


def _write(store, obj) -> bytes:  # noqa: ANN001

    if obj.type_num == 2:  # a tree: a pin's check of what its ref reaches need not read it back (pin_objects.py)
        remember_tree(obj.id, obj.as_raw_string())
    return add_object(store, obj)
