"""The lines two commits each changed against their common base, in some paths: the hunks
domain/merge_queue/line_overlap.py compares to warn of candidates that change the same lines (read from the object
store with dulwich; nothing is written).

Lines are aligned by a shortest edit script, as git's diff aligns them (merge.py's). A path is compared as a whole
file (None) where lines cannot be: a binary file (a NUL byte in its first 8000), a symlink, submodule or folder on
either side, a file past MAX_BLOB_BYTES, more than merge.py's edits apart from the base, a path the candidate quoted
(not UTF-8 or holding control characters), or two commits with no single merge base.
"""

from __future__ import annotations

import stat
import zlib
from collections.abc import Sequence
from pathlib import Path

from ....domain.merge_queue.line_overlap import Hunk, SideHunks
from .blobs import is_too_large_to_read, stored_size
from .ids import commit_at, object_id
from .merge import _BINARY_SNIFF, _merge_bases, _ShortestEdits, _TooDifferent
from .repository import commit_of, open_repo

__all__ = ["MAX_BLOB_BYTES", "changed_lines"]

MAX_BLOB_BYTES = 8 << 20  # a bigger file is compared as a whole file, never read


def changed_lines(repository: Path, first: str, second: str,
                  paths: Sequence[str]) -> dict[str, tuple[SideHunks, SideHunks]]:
    """For each path: the hunks first and second each made in it against their merge base (see line_overlap). Every
    path is None on both sides when the repository, a commit or the single merge base cannot be read. Never raises
    for a state of the world."""
    unknown: dict[str, tuple[SideHunks, SideHunks]] = {p: (None, None) for p in paths}
    try:
        repo = open_repo(repository)
    except Exception:  # noqa: BLE001 - a warning's detail: the paths are compared as paths instead
        return unknown
    with repo:
        try:
            ours, theirs = commit_of(repo, first), commit_of(repo, second)
            if ours is None or theirs is None:
                return unknown
            bases = _merge_bases(repo, ours.id, theirs.id)
            if len(bases) != 1:  # unrelated, or criss-cross: no one base to count lines from
                return unknown
            trees = [commit_at(repo, bases[0]).tree, ours.tree, theirs.tree]
            return {p: _path_hunks(repo, trees, p) for p in paths}
        except (KeyError, ValueError, OSError, zlib.error):
            return unknown


def _path_hunks(repo, trees: list[bytes], path: str) -> tuple[SideHunks, SideHunks]:  # noqa: ANN001
    if path.startswith('"'):
        return None, None
    base, ours, theirs = (_entry(repo, tree, path.encode("utf-8")) for tree in trees)
    return _side(repo, base, ours), _side(repo, base, theirs)


def _entry(repo, tree: bytes, path: bytes) -> tuple[int, bytes] | None:  # noqa: ANN001
    """(mode, sha) of path in tree; None when absent (or a file stands where a folder of it would be)."""
    from dulwich.object_store import tree_lookup_path

    try:
        return tree_lookup_path(repo.__getitem__, object_id(tree), path)
    except (KeyError, NotADirectoryError):
        return None


def _side(repo, base: tuple[int, bytes] | None, side: tuple[int, bytes] | None) -> SideHunks:  # noqa: ANN001
    if base == side:
        return ()
    if any(e is not None and not stat.S_ISREG(e[0]) for e in (base, side)):
        return None
    if base is not None and side is not None and base[1] == side[1]:
        return ()  # the mode alone changed: no line did
    lines = [_lines(repo, e[1]) if e is not None else [] for e in (base, side)]
    if lines[0] is None or lines[1] is None:
        return None
    try:
        blocks = _ShortestEdits(None, lines[0], lines[1]).get_matching_blocks()
    except _TooDifferent:
        return None
    hunks: list[Hunk] = []
    i = j = 0
    for bi, bj, size in blocks:
        if (i, j) != (bi, bj):
            hunks.append((i, bi))
        i, j = bi + size, bj + size
    return tuple(hunks)


def _lines(repo, sha: bytes) -> list[bytes] | None:  # noqa: ANN001
    size = stored_size(repo.object_store, sha)
    if size is None or size > MAX_BLOB_BYTES:
        return None
    try:
        data = repo.object_store[object_id(sha)].data
    except zlib.error as e:
        if is_too_large_to_read(e):
            return None
        raise
    if b"\0" in data[:_BINARY_SNIFF]:
        return None
    return data.splitlines(True)
