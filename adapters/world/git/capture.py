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

import os
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ....domain.candidate import recordable, require_recordable
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import Conflict, NotFound, Refused
from ....domain.containment.processes import safe_text
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from .blobs import has_object
from .change_watch import watch_of
from .flat_trees import FLATTENED as _FLATTENED, flattened as _flattened
from .ids import object_id, ref_name
from .repository import DulwichRepository, open_repo, same
from .size_limit import SizeLimit, require_small_history
from .stat_cache import CACHE_NAME, StatCache, seed_stat_cache
from .trees import changed_paths, commit_tree, tree_paths
from .worktree_walk import TREE, _Entry, _Walk, _artifact_prefix, _ignores, _write
from ....domain.binding import quote_path
from .objects import import_objects

__all__ = ["Capture", "DulwichCapture", "Unstable", "bring_home", "capture", "capture_twice", "seed_stat_cache"]


FEW_REPORTED = 1_000  # a watched capture of at most this many reported paths (and no folder to walk) reads them all


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
            head = repo.refs[ref_name(b"HEAD")]
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
            # only what the workspace's watch reported since it was made is looked at
            if watch is not None and reported is not None:
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


# Objects ----------------------------------------------------------------------


def _new_tree(entries: dict[bytes, _Entry]):  # noqa: ANN202
    from dulwich.objects import Tree

    tree = Tree()
    for name, (mode, sha) in entries.items():
        tree.add(name, mode, object_id(sha))
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

    return tuple(quote_path(p) for p in sorted(changes))


def _changed_paths(store, old_tree: bytes, new_tree: bytes) -> tuple[str, ...]:  # noqa: ANN001

    return tuple(quote_path(p) for p in sorted(_raw_changed(store, old_tree, new_tree)))


def _raw_changed(store, old_tree: bytes, new_tree: bytes) -> set[bytes]:  # noqa: ANN001
    from dulwich.diff_tree import tree_changes

    paths = set()
    for change in tree_changes(store, object_id(old_tree), object_id(new_tree)):
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
