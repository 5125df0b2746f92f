"""Writing git objects when other processes may write the same ones at the same moment, and copying what a
workspace's objects add (import_objects) into the user's repository.

dulwich writes a loose object under a lock file; a second process writing the
same object at the same moment (two pins of one worktree, two captures) finds
the lock and raises FileLocked, and a writer SIGKILLed mid-write leaves its lock
behind for good. An object's bytes are fixed by its id, so a lock old enough to
be a dead writer's (adapters/world/git/stale_locks.py) is removed and the write
tried again, and a young one's loser writes its own temporary file and links it
into place, never replacing anything: neither waits, and neither fails.

Every object docket writes goes through add_object.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import zlib
from pathlib import Path
from typing import Any

from .blobs import has_object, is_too_large_to_read
from .stale_locks import remove_if_stale

__all__ = ["DOCKET_IDENTITY", "add_object", "import_objects", "keep_docket_made", "verified"]

_TREE, _GITLINK = 0o040000, 0o160000


def add_object(store: Any, obj: Any) -> bytes:
    """Store obj (if not there yet) in the repository's object store; its id."""
    from dulwich.file import FileLocked

    if has_object(store, obj.id):
        return obj.id
    try:
        _add_through_prunes(store, obj)
        return obj.id
    except FileLocked as locked:
        lock = Path(os.fsdecode(locked.lockfilename))
    if remove_if_stale(lock):
        try:
            store.add_object(obj)
            return obj.id
        except FileLocked:
            pass  # another writer took the lock meanwhile
    _link_into_place(store, obj)
    return obj.id


def _add_through_prunes(store: Any, obj: Any, tries: int = 5) -> None:
    """store.add_object, again when the object's folder vanished between dulwich making it and writing the file in
    it (``git prune`` removes the loose-object folders it empties)."""
    for _ in range(tries - 1):
        try:
            store.add_object(obj)
            return
        except FileNotFoundError:
            continue
    store.add_object(obj)


DOCKET_IDENTITY = b"docket <docket@localhost>"  # the author of every commit docket makes (pins and merges)


def keep_docket_made(source: Any, own: Path, commit: bytes) -> int:
    """Copy into the object folder own what commit brings that no commit of someone else's holds: the commits
    docket made on the way to it (candidate pins, merges; the author says which) and the trees and blobs each adds to
    its parents. Such commits may be named by no ref of the repository source belongs to (the start of a task that
    depends on others is a merge nothing else names), and ``git gc --prune=now`` there would take them from a
    workspace that borrows them. Written straight into own (never found through its alternates); the count.
    KeyError when source lacks one of them."""
    from dulwich.object_store import DiskObjectStore
    from dulwich.objects import Commit

    target = DiskObjectStore(str(own))
    pending, seen, copied = [commit], set(), 0
    try:
        while pending:
            sha = pending.pop()
            if sha in seen:
                continue
            seen.add(sha)
            made = verified(source, sha)
            if not isinstance(made, Commit) or made.author != DOCKET_IDENTITY:
                continue
            olds = [verified(source, parent).tree for parent in made.parents]
            copied += _copy_new(source, target, made.tree, olds) + 1
            target.add_object(made)
            pending.extend(made.parents)
    finally:
        target.close()
    return copied


def _copy_new(source: Any, target: Any, tree_id: bytes, olds: list[bytes]) -> int:
    """tree_id's tree and what in it none of the trees olds holds at the same name, copied into target."""
    if tree_id in olds:
        return 0
    tree = verified(source, tree_id)
    old_entries = [{name: (mode, sha) for name, mode, sha in verified(source, old).iteritems()} for old in olds]
    copied = 0
    for name, mode, sha in tree.iteritems():
        if mode == _GITLINK:
            continue
        same = [entries.get(name) for entries in old_entries]
        if any(entry is not None and entry[1] == sha for entry in same):
            continue
        if mode == _TREE:
            copied += _copy_new(source, target, sha, [e[1] for e in same if e is not None and e[0] == _TREE])
        else:
            try:
                target.add_object(verified(source, sha))
            except zlib.error as e:
                if not is_too_large_to_read(e):
                    raise
                continue  # too large to copy whole: borrowed from the user's store, where a docket ref holds it
            copied += 1
    target.add_object(tree)
    return copied + 1


def _link_into_place(store: Any, obj: Any) -> None:
    hex_id = obj.id.decode("ascii")
    folder = os.path.join(store.path, hex_id[:2])
    path = os.path.join(folder, hex_id[2:])
    os.makedirs(folder, exist_ok=True)
    draft = f"{path}.docket-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(obj.as_legacy_object())
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # the other writer finished first: the same bytes
    finally:
        os.unlink(draft)


def import_objects(source, target, head: str, tree: str) -> int:  # noqa: ANN001
    """Copy into target's object store every object that head's history and tree need and target lacks; the count.

    Commits are walked from head back to the first commit target has; trees are entered only where target lacks
    them (a tree target has, it has whole). Each object is read through dulwich and stored under the id its own
    bytes hash to: an object whose bytes do not hash to the id it was asked for is refused (ValueError), never
    stored under that id. KeyError when source lacks an object that is needed.
    """
    from dulwich.objects import Commit

    wanted_trees: list[bytes] = [tree.encode("ascii")]
    commits = []
    pending = [head.encode("ascii")]
    seen: set[bytes] = set()
    while pending:
        sha = pending.pop()
        if sha in seen or sha in target:
            continue
        seen.add(sha)
        commit = verified(source, sha)
        if not isinstance(commit, Commit):
            raise ValueError(f"{sha.decode()} is no commit")
        commits.append(commit)
        wanted_trees.append(commit.tree)
        pending.extend(commit.parents)
    copied = 0
    stack = list(wanted_trees)
    while stack:
        sha = stack.pop()
        if sha in seen or sha in target:
            continue
        seen.add(sha)
        obj = verified(source, sha)
        for _name, mode, child in obj.iteritems():
            if mode == _TREE:
                stack.append(child)
            elif mode != _GITLINK and child not in seen and child not in target:
                seen.add(child)
                add_object(target, verified(source, child))
                copied += 1
        add_object(target, obj)
        copied += 1
    for commit in reversed(commits):  # parents before children: a commit is stored once all it names is there
        add_object(target, commit)
        copied += 1
    return copied


def verified(store, sha: bytes):  # noqa: ANN001, ANN202
    """The object store holds under sha, hashed again from its bytes: never taken on its file's name."""
    obj = store[sha]
    raw = obj.as_raw_string()
    found = hashlib.sha1(b"%s %d\0" % (obj.type_name, len(raw)) + raw).hexdigest().encode("ascii")
    if found != sha:
        raise ValueError(f"object {sha.decode()} holds bytes that hash to {found.decode()}")
    return obj
