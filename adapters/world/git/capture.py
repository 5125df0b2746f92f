"""Capture a worktree into a git tree: its HEAD plus everything uncommitted, as `git add -A` in a private index would.

The worktree's shared index is never read or written. The tree is built from
HEAD's tree and the files on disk, and only the folders on the way to a change
are written anew (every other subtree is HEAD's own). A private stat cache
(``<git dir of the worktree>/docket-capture.index``) maps each path to the stat
fields and blob id it had when last hashed, so an unchanged file is not read
again; as git's racy-git rule, an entry whose mtime is not older than the
cache file's own is always hashed again. A workspace docket made in this
process has a change watch (change_watch.py): its captures look only at the
paths the watch reported since it was made, with the same answer.

What is not captured, as git does: ignored untracked files (.gitignore files,
``info/exclude`` of the common git dir, ``core.excludesFile``), anything
that is neither a file nor a symlink. Beyond git: untracked files under the
artifact directory (tracked ones are kept, with their changes), and nested
repositories (a folder holding a ``.git``), which are skipped: a submodule
keeps the commit HEAD records for it, an untracked nested repository is left
out, where `git add -A` would add it as a gitlink. Symlinks are captured as
symlinks and a symlinked folder is never entered. Not supported: clean/smudge
filters and end-of-line conversion (``.gitattributes``), ``core.fileMode=false``
and ``core.symlinks=false``: the bytes and the executable bit on disk are taken
as they are.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ....domain.candidate import recordable, require_recordable
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import BadInput, Conflict, NotFound, Refused
from ....domain.containment.processes import safe_text
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from .blobs import has_object
from .change_watch import watch_of
from .flat_trees import FLATTENED as _FLATTENED  # noqa: F401  (tests clear it)
from .flat_trees import flattened as _flattened
from .flat_trees import MAX_TREE_DEPTH, remember_tree, too_deep, unsafe_name, unsafe_path
from ..files.regular_files import NotRegular, open_regular
from .repository import DulwichRepository, open_repo, same
from .size_limit import SizeLimit, large_file_id, require_small_history
from .stat_cache import CACHE_NAME, StatCache, seed_stat_cache
from .trees import changed_paths, commit_tree, tree_paths

__all__ = ["Capture", "DulwichCapture", "Unstable", "bring_home", "capture", "capture_twice", "seed_stat_cache"]

TREE, FILE, EXECUTABLE, SYMLINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000

_Entry = tuple[int, bytes]  # (git mode, blob id as 40 hex bytes)
FEW_REPORTED = 1_000  # a watched capture of at most this many reported paths (and no folder to walk) reads them all
HELD_BYTES = 64 << 20  # the content of files hashed before their blobs may be written, held rather than read again
_PENDING: _Entry = (0, b"")  # a file listed, not read yet: no entry of HEAD's is this


@dataclass(frozen=True)
class Capture:
    head: str  # the worktree's HEAD commit it was built on
    tree: str  # the tree object written (sha1 hex)
    changed: tuple[str, ...]  # sorted paths (files, symlinks, gitlinks) that differ between base's tree and tree
    git_dir: str = ""  # the worktree's own git dir (absolute): with its real path, which checkout this came from


@dataclass(frozen=True)
class Unstable:
    """Two captures of one worktree that differ: nothing is to be pinned."""

    first: Capture
    second: Capture
    differing: tuple[str, ...]  # sorted paths whose content or mode differs between the two trees


def capture_twice(worktree: Path, *, expected_head: str | None, base: str, artifact_dir: str | None,
                  repository: Path | None = None, between: Callable[[], None] | None = None,
                  max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Capture | Unstable:
    """Capture the worktree twice; the capture when both agree (head, tree and changed paths), else Unstable.

    With repository (the git common dir a workspace borrows from), an agreed capture's objects (HEAD's history
    and the tree: what its candidate needs) are brought into that repository's own object store first (see
    bring_home). ``between`` runs between the two captures (tests use it to change a file). Raises as `capture`
    does.
    """
    stored: set[bytes] = set()  # ids the first capture found or wrote in the store: the second need not ask again
    watch = watch_of(worktree)
    mark = None if watch is None else watch.mark()
    first = capture(worktree, expected_head=expected_head, base=base, artifact_dir=artifact_dir, home=repository,
                    stored=stored, max_file_size=max_file_size)
    if between is not None:
        between()
    if mark is not None and _quiet_since(watch, mark, first.head):
        second = first
    else:
        second = capture(worktree, expected_head=expected_head, base=base, artifact_dir=artifact_dir,
                         home=repository, like=first, stored=stored, max_file_size=max_file_size)
    if first == second:
        if repository is not None:
            bring_home(Path(worktree), Path(repository), first, max_file_size=max_file_size)
        return first
    return Unstable(first, second, _differing(Path(worktree), first, second))


def _quiet_since(watch, mark: int, head: str) -> bool:  # noqa: ANN001
    """Whether the workspace's watch reported nothing since mark (taken before a capture began) and would have
    reported any change to what the capture looked at (change_watch.Watch.settled_since): it is then stable."""
    return watch.settled_since(mark, head)


def capture(worktree: Path, *, expected_head: str | None, base: str, artifact_dir: str | None,
            home: Path | None = None, like: Capture | None = None, stored: set[bytes] | None = None,
            max_file_size: int = DEFAULT_MAX_FILE_SIZE, rewrite: bool = False) -> Capture:
    """Write the tree of the worktree's HEAD plus its uncommitted changes; list the paths it changes against base.

    Raises Conflict ``head-moved`` when HEAD is not expected_head (None: any
    HEAD), Refused ``worktree-unreadable`` when the folder is not the top of a
    git worktree with a commit at HEAD, NotFound ``base-missing`` when base names
    no commit or tree, BadInput ``bad-artifact-dir`` when artifact_dir is
    absolute or leaves the worktree. A file or folder of the worktree that
    cannot be read, or vanishes or changes kind during the walk, is
    ``worktree-unreadable`` too. Blobs and trees are written to the
    repository's object store (unreferenced until pinned; with home, the
    git common dir a workspace borrows from, into home's own store, where a
    pin needs them, never into the workspace's). like: an earlier capture
    against the same base; when this one has its head and tree, its changed
    paths are taken as they are (they depend on nothing else). stored: ids
    known to be in the store it writes to (an earlier capture of the same
    call found or wrote them), not looked up again; what this one finds or
    writes is added. A file larger than max_file_size whose content is not
    the base's blob at its path is Refused ``file-too-large``, read without
    being held in memory and before any object of it is written. Refused
    ``too-many-changes`` when a candidate could not record the paths it
    changes against base (domain.candidate.recordable): known from a walk that
    only lists and stats, before any file is read or object written (a walk
    whose changes may or may not be too many, files of HEAD's not read yet,
    hashes every file first and writes once they are counted). rewrite:
    hash every file (no stat cache, none saved) and write every blob and tree
    the capture is made of that the store lacks, HEAD's too (what a pin needs
    again after a prune deleted it). OSError while writing them propagates.
    """
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit

    worktree = Path(worktree)
    artifact = _artifact_prefix(artifact_dir)
    try:
        repo = open_repo(worktree)
    except (NotGitRepository, OSError) as e:
        raise Refused(Code.WORKTREE_UNREADABLE, f"{worktree} is not a git worktree: {e}") from None
    with repo:
        if repo.bare or not same(Path(repo.path), worktree):
            raise Refused(Code.WORKTREE_UNREADABLE, f"{worktree} is not the top folder of a git worktree")
        try:
            head = repo.refs[b"HEAD"]
            commit = repo[head]
        except KeyError:
            raise Refused(Code.WORKTREE_UNREADABLE, f"the worktree {worktree} has no commit at HEAD") from None
        if not isinstance(commit, Commit):
            raise Refused(Code.WORKTREE_UNREADABLE, f"HEAD of {worktree} names a {commit.type_name.decode()}")
        head_hex = head.decode("ascii")
        if expected_head is not None and head_hex != expected_head:
            raise Conflict(Code.HEAD_MOVED, f"HEAD of {worktree} is {head_hex}, not the expected {expected_head}")
        base_tree = _tree_of(repo, base)
        written = None if home is None else _home_store(home)
        try:
            store = _WrittenHome(repo.object_store, repo.object_store if written is None else written,
                                 set() if stored is None else stored)
            tracked, tracked_folders, head_trees = _flattened(store, commit.tree)
            watch = None if rewrite else watch_of(worktree)
            reported = None if watch is None else watch.changes(head_hex)
            # a few paths reported: reading them costs less than reading the cache (a record per file)
            few = reported is not None and not reported[1] and len(reported[0]) <= FEW_REPORTED
            cache = StatCache(None if rewrite or few else Path(repo.controldir()) / CACHE_NAME)
            walk = _Walk(worktree, store, tracked, tracked_folders, artifact, _ignores(repo), cache,
                         SizeLimit(max_file_size, lambda: _flattened(store, base_tree)[0]))
            walk.write_all = rewrite
            if reported is not None:  # only what the workspace's watch reported since it was made is looked at
                watch.fast_captures += 1
                watch.watch_new_files()  # before they are read: a write after this is reported
                walk.watched(*reported)
            else:
                walk.folder(b"")
            # Nothing is read or written before the changes are known to be few enough for a candidate to record:
            # the walk above only listed and stat'ed (and took unchanged files from the stat cache).
            where = f"the worktree {safe_text(os.fsdecode(worktree))}"
            moved = None if base_tree == commit.tree else _raw_changed(store, base_tree, commit.tree)
            at_most, at_least = walk.bounds(moved)
            require_recordable(_quoted(at_least), where, at_least=True)
            one_pass = recordable(_quoted(at_most))  # (else each blob is written once all are hashed and counted)
            walk.hash_pending(write=one_pass)
            built = _build(store, walk, head_trees, commit.tree, base_tree, like, head_hex)
            require_recordable(built[2], where)
            if walk.write_unwritten():  # a file changed since it was hashed: the capture holds what was written
                built = _build(store, walk, head_trees, commit.tree, base_tree, like, head_hex)
                require_recordable(built[2], where)
            tree, trees, changed = built
            for obj in trees.values():
                _write(store, obj)
            if reported is None and not rewrite and (walk.hashed or walk.stats != cache.records):
                cache.save(walk.stats)  # (else the same, none racy: kept; a watched capture saw only a part)
            return Capture(head_hex, tree.decode("ascii"), changed, os.path.realpath(repo.controldir()))
        finally:
            if written is not None:
                written.close()


class _WrittenHome:
    """A workspace's object store that reads as itself (its own objects, then the ones it borrows) and writes into
    the repository it borrows from: what a capture writes is where its pin needs it (without a home, it writes into
    itself). Ids it found or wrote are remembered in stored, shared by the two captures of capture_twice."""

    def __init__(self, read, write, stored: set[bytes]) -> None:  # noqa: ANN001
        self.read, self.write, self.path, self.stored = read, write, write.path, stored

    def __getitem__(self, sha: bytes):  # noqa: ANN204
        return self.read[sha]

    def get_raw(self, sha: bytes) -> tuple[int, bytes]:
        return self.read.get_raw(sha)

    def __contains__(self, sha: bytes) -> bool:
        if sha in self.stored:
            return True
        if has_object(self.write, sha):  # an object only the workspace has is still written home
            self.stored.add(sha)
            return True
        return False

    def add_object(self, obj) -> None:  # noqa: ANN001
        self.write.add_object(obj)
        self.stored.add(obj.id)

    def __getattr__(self, name: str):  # noqa: ANN204  anything else a reader asks (tree_changes, ...)
        return getattr(self.read, name)


def _home_store(home: Path):  # noqa: ANN202
    from dulwich.object_store import DiskObjectStore

    return DiskObjectStore(os.path.join(home, "objects"))


def _build(store, walk: _Walk, head_trees, head_tree: bytes, base_tree: bytes,  # noqa: ANN001
           like: Capture | None, head_hex: str) -> tuple[bytes, dict, tuple[str, ...]]:
    """The capture's tree id, the trees it needs written (none written yet: by id), and the paths it changes against
    base_tree (read through those trees)."""
    trees: dict[bytes, object] = {}

    def keep(obj) -> bytes:  # noqa: ANN001
        trees[obj.id] = obj
        return obj.id

    changes = walk.changes()
    tree = _apply(keep, head_trees, head_tree, changes) or keep(_new_tree({}))
    if like is not None and (like.head, like.tree) == (head_hex, tree.decode("ascii")):
        return tree, trees, like.changed
    if base_tree == head_tree:
        return tree, trees, _quoted(changes)
    return tree, trees, _changed_paths(_Unwritten(store, trees), base_tree, tree)


class _Unwritten:
    """A store as a tree diff reads it, with trees not written yet."""

    def __init__(self, store, trees: dict) -> None:  # noqa: ANN001
        self.store, self.trees = store, trees

    def __getitem__(self, sha: bytes):  # noqa: ANN204
        found = self.trees.get(sha)
        return self.store[sha] if found is None else found


# Walking the worktree --------------------------------------------------------


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


# Objects ----------------------------------------------------------------------


def _write_blob(store, data: bytes) -> bytes:  # noqa: ANN001
    from dulwich.objects import Blob

    blob = Blob.from_string(data)
    return _write(store, blob)


def _write(store, obj) -> bytes:  # noqa: ANN001
    from .objects import add_object

    if obj.type_num == 2:  # a tree: a pin's check of what its ref reaches need not read it back (pin_objects.py)
        remember_tree(obj.id, obj.as_raw_string())
    return add_object(store, obj)


def _new_tree(entries: dict[bytes, _Entry]):  # noqa: ANN202
    from dulwich.objects import Tree

    tree = Tree()
    for name, (mode, sha) in entries.items():
        tree.add(name, mode, sha)
    return tree


def _tree_of(repo, base: str) -> bytes:  # noqa: ANN001
    from dulwich.objects import Commit, Tree

    try:
        obj = repo[base.encode("ascii")]
    except (KeyError, ValueError, UnicodeEncodeError):
        raise NotFound(Code.BASE_MISSING, f"the base {base} is not in the repository") from None
    if isinstance(obj, Commit):
        return obj.tree
    if isinstance(obj, Tree):
        return obj.id
    raise NotFound(Code.BASE_MISSING, f"the base {base} names a {obj.type_name.decode()}, not a commit")


def _apply(keep: Callable[[object], bytes], trees: dict[bytes, list[tuple[bytes, int, bytes]]],
           tree_id: bytes | None, changes: dict[bytes, _Entry | None]) -> bytes | None:
    """tree_id with changes made (None: removed), handing keep only the trees on the way; None when it ends empty.
    trees: HEAD's trees as _flatten read them (every tree_id this is asked about is one of them)."""
    if not changes:
        return tree_id
    entries = {name: (mode, sha) for name, mode, sha in trees[tree_id]} if tree_id else {}
    here: dict[bytes, _Entry | None] = {}
    below: dict[bytes, dict[bytes, _Entry | None]] = {}
    for path, entry in changes.items():
        name, slash, rest = path.partition(b"/")
        if slash:
            below.setdefault(name, {})[rest] = entry
        else:
            here[name] = entry
    for name, inner in below.items():  # a file may turn into a folder and back: a removal only removes its own kind
        old = entries.get(name)
        subtree = _apply(keep, trees, old[1] if old and old[0] == TREE else None, inner)
        if subtree is not None:
            entries[name] = (TREE, subtree)
        elif old and old[0] == TREE:
            del entries[name]
    for name, entry in here.items():
        if entry is not None:
            entries[name] = entry
        elif name in entries and entries[name][0] != TREE:
            del entries[name]
    return keep(_new_tree(entries)) if entries else None


def _quoted(changes: Iterable[bytes]) -> tuple[str, ...]:
    """The paths quoted, sorted. Given what a capture changed against HEAD's entries, its changed paths when the base
    is HEAD's own tree, as _changed_paths would list them, without reading a tree again."""
    from ....domain.binding import quote_path

    return tuple(quote_path(p) for p in sorted(changes))


def _changed_paths(store, old_tree: bytes, new_tree: bytes) -> tuple[str, ...]:  # noqa: ANN001
    from ....domain.binding import quote_path

    return tuple(quote_path(p) for p in sorted(_raw_changed(store, old_tree, new_tree)))


def _raw_changed(store, old_tree: bytes, new_tree: bytes) -> set[bytes]:  # noqa: ANN001
    from dulwich.diff_tree import tree_changes

    paths = set()
    for change in tree_changes(store, old_tree, new_tree):
        for side in (change.old, change.new):
            if side is not None and side.path is not None:
                paths.add(side.path)
    return paths


def _differing(worktree: Path, first: Capture, second: Capture) -> tuple[str, ...]:

    with open_repo(worktree) as repo:
        paths = set(_changed_paths(repo.object_store, first.tree.encode(), second.tree.encode()))
    return tuple(sorted(paths | (set(first.changed) ^ set(second.changed))))


def bring_home(workspace: Path, repository: Path, captured: Capture, *,
               max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> int:
    """Copy into the repository's own object store what captured needs and it lacks (commits the agent made in its
    workspace, the blobs and trees the capture wrote there); the number of objects copied.

    The repository is the caller's, never read from the workspace (whose alternates the agent may rewrite). Every
    object is read through dulwich and hashed again (objects.import_objects). Refused
    ``worktree-unreadable`` when the workspace lacks an object the capture needs or holds one whose bytes do not
    match its id; OSError while writing propagates. Writing an object twice changes nothing: idempotent.
    Refused ``file-too-large`` when the workspace's commits hold a blob over max_file_size that the repository
    lacks (a large file committed, then deleted): its size is read from its header, nothing is copied.
    """
    from dulwich.errors import ChecksumMismatch, NotGitRepository

    from .objects import import_objects

    try:
        home = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        raise Refused(Code.WORKTREE_UNREADABLE, f"cannot open the repository {repository}: {e}") from None
    with home, open_repo(workspace) as repo:
        try:
            require_small_history(repo.object_store, home.object_store, captured.head, captured.tree,
                                  max_file_size)
            return import_objects(repo.object_store, home.object_store, captured.head, captured.tree)
        except (KeyError, ValueError, ChecksumMismatch) as e:
            raise Refused(Code.WORKTREE_UNREADABLE, f"the workspace {workspace} cannot give the objects its capture "
                                                 f"needs: {e}") from None
        except zlib.error as e:  # a blob under max_file_size (set high) that dulwich will not hold in memory
            from ....domain.kernel.codes import Code
            from .blobs import is_too_large_to_read

            if not is_too_large_to_read(e):
                raise
            raise Refused(Code.FILE_TOO_LARGE, f"the workspace {workspace} holds an object larger than docket "
                                               "reads into memory; nothing was pinned") from None


class DulwichCapture(DulwichRepository):
    """The CapturePort: worktrees captured into trees, commits' trees read (trees.py)."""

    def capture_twice(self, worktree: Path, *, expected_head: str | None, base: str,
                      artifact_dir: str | None, repository: Path | None = None,
                      max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Capture | Unstable:
        return capture_twice(worktree, expected_head=expected_head, base=base, artifact_dir=artifact_dir,
                             repository=repository, max_file_size=max_file_size)

    def commit_tree(self, repository: Path, commit: str) -> str:
        return commit_tree(repository, commit)

    def tree_paths(self, repository: Path, commit: str, folder: str) -> list[str]:
        return tree_paths(repository, commit, folder)

    def changed_paths(self, repository: Path, base: str, commit: str) -> tuple[str, ...]:
        return changed_paths(repository, base, commit)
