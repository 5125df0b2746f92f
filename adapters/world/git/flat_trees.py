"""HEAD's tree read flat (path -> mode and blob, the folders, each tree's entries), remembered by tree id in this
process: what a capture (capture.py) starts from and a change watch (change_watch.py) watches."""

from __future__ import annotations

import hashlib

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import Refused

__all__ = ["FLATTENED", "MAX_TREE_DEPTH", "RAW_TREES", "flattened", "remember_tree", "too_deep", "unsafe_name",
           "unsafe_path"]

TREE = 0o040000
_Entry = tuple[int, bytes]  # (git mode, blob id as 40 hex bytes)
_Flat = tuple[dict[bytes, _Entry], set[bytes], dict[bytes, list[tuple[bytes, int, bytes]]]]
FLATTENED: dict[bytes, _Flat] = {}  # tree id -> _flatten's answer, last few
FLATTENED_KEPT = 8
RAW_TREES: dict[bytes, bytes] = {}  # tree id -> its raw content, only as built or read and hashed again
RAW_TREES_KEPT = 50_000
# Folders nested deeper than this in a workspace (on disk or in its commits) refuse its capture: far deeper than any
# project's, and far below what a recursive walk (docket's, dulwich's, git's own core.maxTreeDepth) or PATH_MAX bear.
MAX_TREE_DEPTH = 256


def too_deep(path: bytes) -> Refused:
    """Refused ``tree-too-deep`` for a folder path past MAX_TREE_DEPTH: that task's capture fails, the run goes on."""
    shown = path[:120].decode("utf-8", "replace") + "..."
    return Refused(Code.TREE_TOO_DEEP, f"the folder {shown!r} is nested more than {MAX_TREE_DEPTH} folders deep; "
                                       "nothing was pinned: flatten it or ignore it (.gitignore)")


def remember_tree(sha: bytes, raw: bytes) -> None:
    """Keep a tree's raw content by its id (the caller built it, or hashed it again as read)."""
    if len(RAW_TREES) >= RAW_TREES_KEPT:
        RAW_TREES.pop(next(iter(RAW_TREES)))
    RAW_TREES[sha] = raw


def unsafe_name(name: bytes) -> bool:
    """Whether a file or folder name cannot be checked out safely: '.', '..', or '.git' in any case or spelling git
    refuses ('.GIT', '.git.'). The test an execution's checkout applies (own_repositories, execution_pool), applied
    when a workspace is captured, so such a tree fails its own task's pin instead of every check of the run."""
    from dulwich.index import validate_path_element_default

    return not validate_path_element_default(name) or name.lower() == b".git"


def unsafe_path(path: bytes) -> Refused:
    """Refused ``unsafe-tree-path``: a workspace's file or folder (on disk or in its commits) that a checkout of its
    candidate would refuse to write (unsafe_name); that task's capture fails, the run goes on."""
    shown = path[:200].decode("utf-8", "replace")
    return Refused(Code.UNSAFE_TREE_PATH, f"{shown!r} names a folder or file git refuses to check out ('.git' in "
                                          "another case or spelling); nothing was pinned: remove or rename it")


def flattened(store, tree_id: bytes) -> _Flat:  # noqa: ANN001
    """_flatten, remembered by tree id for this process: a tree's content is fixed by its id (each tree read is hashed
    again, so no workspace's planted object can stand for another's tree), so the second capture
    of capture_twice (and every later pin on the same HEAD in `docket go`) reads no tree again. The caller must not
    change what it gets (capture only reads it)."""
    found = FLATTENED.get(tree_id)
    if found is None:
        found = _flatten(store, tree_id)
        if len(FLATTENED) >= FLATTENED_KEPT:
            FLATTENED.pop(next(iter(FLATTENED)))
        FLATTENED[tree_id] = found
    return found


def _flatten(store, tree_id: bytes) -> _Flat:  # noqa: ANN001
    """Every non-tree entry under tree_id (path -> (mode, sha)), the folders that hold them, and each tree's own
    entries (tree id -> [(name, mode, sha)], hashed again as read: what _apply starts from)."""
    from dulwich.objects import parse_tree

    out: dict[bytes, _Entry] = {}
    folders: set[bytes] = set()
    trees: dict[bytes, list[tuple[bytes, int, bytes]]] = {}
    pending = [(b"", tree_id)]
    while pending:
        prefix, sha = pending.pop()
        kind, raw = store.get_raw(sha)  # raw: no Tree object built per folder
        if kind != 2 or hashlib.sha1(b"tree %d\0" % len(raw) + raw).hexdigest().encode("ascii") != sha:
            # a workspace's own store is the agent's to write: what is remembered by id must be what the id names
            raise Refused(Code.WORKTREE_UNREADABLE, f"tree {sha.decode()} in the object store is not that tree")
        remember_tree(sha, raw)
        trees[sha] = entries = list(parse_tree(raw, 20))
        for name, mode, child in entries:
            path = prefix + name
            if unsafe_name(name):  # committed by the agent: its checkout would refuse it
                raise unsafe_path(path)
            if mode == TREE:
                if path.count(b"/") >= MAX_TREE_DEPTH:  # a commit of the agent's: _apply recurses by depth
                    raise too_deep(path)
                folders.add(path)
                pending.append((path + b"/", child))
            else:
                out[path] = (mode, child)
    return out, folders, trees
