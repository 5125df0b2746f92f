"""HEAD's tree read flat (path -> mode and blob, the folders, each tree's entries), remembered by tree id in this
process: what a capture (capture.py) starts from and a change watch (change_watch.py) watches."""

from __future__ import annotations

import hashlib

from ...domain.errors import Refused

__all__ = ["FLATTENED", "RAW_TREES", "flattened", "remember_tree"]

TREE = 0o040000
_Entry = tuple[int, bytes]  # (git mode, blob id as 40 hex bytes)
_Flat = tuple[dict[bytes, _Entry], set[bytes], dict[bytes, list[tuple[bytes, int, bytes]]]]
FLATTENED: dict[bytes, _Flat] = {}  # tree id -> _flatten's answer, last few
FLATTENED_KEPT = 8
RAW_TREES: dict[bytes, bytes] = {}  # tree id -> its raw content, only as built or read and hashed again
RAW_TREES_KEPT = 50_000


def remember_tree(sha: bytes, raw: bytes) -> None:
    """Keep a tree's raw content by its id (the caller built it, or hashed it again as read)."""
    if len(RAW_TREES) >= RAW_TREES_KEPT:
        RAW_TREES.pop(next(iter(RAW_TREES)))
    RAW_TREES[sha] = raw


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
            raise Refused("worktree-unreadable", f"tree {sha.decode()} in the object store is not that tree")
        remember_tree(sha, raw)
        trees[sha] = entries = list(parse_tree(raw, 20))
        for name, mode, child in entries:
            path = prefix + name
            if mode == TREE:
                folders.add(path)
                pending.append((path + b"/", child))
            else:
                out[path] = (mode, child)
    return out, folders, trees
