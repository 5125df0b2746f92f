"""Whether the objects a ref reaches are all there, and putting back the ones that are not.

git's ``gc --prune=now`` deletes every loose object no ref reaches at the moment it looks; docket writes a pin's or
a merge's objects before the ref that names them moves, so a prune in between can leave the ref naming a commit
whose tree (or a blob of it) is gone, and git then fails on the repository for good. An object is safe once a ref
reaches it: so after a ref moves, docket walks what it names here (commit, parents, trees, blobs) and writes what is
missing again from where it still is (sources: a workspace's own object store, or content docket can rebuild), then
walks once more.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .ids import object_id

from .blobs import has_object
import socket
import time
import os
from .objects import add_object, verified

__all__ = ["GC_WAIT_SECONDS", "missing_objects", "wait_out_gc"]

_TREE, _GITLINK = 0o040000, 0o160000
GC_WAIT_SECONDS = 60.0  # a gc running when a ref moved is waited for at most this long before the objects are checked


def wait_out_gc(common: Path, *, timeout: float = GC_WAIT_SECONDS) -> None:
    """Wait (at most timeout) for the ``git gc`` running now in the git directory common, if any, to end.

    A prune looks at the refs first and deletes later: one that looked before a ref moved may delete what the ref
    now names after docket checked it. `git gc` holds ``gc.pid`` (its pid and host) while it runs; a gc that starts
    after the ref moved sees the ref and keeps what it reaches. So after a ref moves docket waits out the gc it
    finds, then checks.
    """

    pidfile = common / "gc.pid"
    try:
        seen = pidfile.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return
    if len(seen) < 2 or not seen[0].isdigit() or seen[1] != socket.gethostname() or not _alive(int(seen[0])):
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.02)
        try:
            now = pidfile.read_text(encoding="utf-8", errors="replace").split()
        except OSError:
            return
        if now != seen or not _alive(int(seen[0])):
            return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def missing_objects(store: Any, tips: Iterable[str | bytes], *, complete: Iterable[str | bytes] = (),
                    sources: Iterable[Any] = ()) -> list[str]:
    """The ids reachable from tips (commits, trees or blobs) that store lacks, sorted; empty when the graph is whole.

    Commits are walked through their parents and trees down to every blob (gitlinks name other repositories and
    are not followed). Commits in complete are taken as whole and not entered (the run's base: the target has
    reached it since before the run), and neither is what a tip's tree shares with the first one's tree at the same
    path: a pin or merge that changes a few files of a big tree reads the trees on the way to them, not the rest.
    An object store lacks is looked up in each of sources in turn and, when one has it and its bytes hash to its id,
    stored (objects.add_object) and walked as if it had been there. Never reads an object twice.
    """
    from dulwich.objects import Commit, ShaFile, Tree, parse_tree

    whole = [_raw(sha) for sha in complete]
    seen = set(whole)
    sources = list(sources)
    twin_root = _tree_of(store, whole[0]) if whole else None
    pending: list[tuple[bytes, bytes | None]] = [(_raw(sha), twin_root) for sha in tips]
    missing: list[str] = []
    while pending:
        sha, twin = pending.pop()
        if sha in seen:
            continue
        seen.add(sha)
        try:
            kind, raw = store.get_raw(sha)
            obj = None
        except KeyError:
            obj = _from_sources(sources, sha)
            if obj is None:
                missing.append(sha.decode("ascii"))
                continue
            add_object(store, obj)
            kind, raw = obj.type_num, obj.as_raw_string()
        if kind == Commit.type_num:
            commit = obj if obj is not None else ShaFile.from_raw_string(kind, raw, object_id(sha))
            assert isinstance(commit, Commit)  # its type is a commit's
            pending.append((commit.tree, twin_root))
            pending.extend((parent, None) for parent in commit.parents)
        elif kind == Tree.type_num:
            shared = _entries(store, twin)
            for name, mode, child in parse_tree(raw, 20):
                if mode == _GITLINK or child in seen:
                    continue
                other = shared.get(name)
                if other is not None and other[1] == child:
                    continue  # the same as the complete tree's, at the same path: whole
                if mode == _TREE:
                    pending.append((child, other[1] if other is not None and other[0] == _TREE else None))
                elif has_object(store, child):
                    seen.add(child)
                else:
                    pending.append((child, None))
    return sorted(missing)


def _tree_of(store: Any, commit: bytes) -> bytes | None:
    try:
        return store[commit].tree
    except (KeyError, AttributeError):
        return None


def _entries(store: Any, tree: bytes | None) -> dict[bytes, tuple[int, bytes]]:
    """name -> (mode, id) of a tree taken as whole; {} for none (or one that cannot be read)."""
    from dulwich.objects import parse_tree

    if tree is None:
        return {}
    try:
        return {name: (mode, child) for name, mode, child in parse_tree(store.get_raw(tree)[1], 20)}
    except KeyError:
        return {}


def _from_sources(sources: list[Any], sha: bytes):  # noqa: ANN202
    """The object under sha in the first source that has it, its bytes hashed again; None when none has it."""
    from dulwich.errors import ChecksumMismatch

    for source in sources:
        try:
            return verified(source, sha)
        except (KeyError, ValueError, ChecksumMismatch, OSError):
            continue
    return None


def _raw(sha: str | bytes) -> bytes:
    return sha if isinstance(sha, bytes) else sha.encode("ascii")
