"""The size limit of what a capture brings home ([candidates] max_file_size): a file over it in the worktree, or a
blob over it in the workspace's commits, refuses the pin (``file-too-large``) before any object of it is written,
unless the base already holds that very content at that path (the user's own large file).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import Refused
from ....domain.kernel.values import format_size
from .blobs import file_blob_id, oversized_blobs
from ..files.regular_files import open_regular
from ....domain.binding import quote_path

__all__ = ["SizeLimit", "large_file_id", "require_small_history"]


class SizeLimit:
    """The size limit of a capture's files, and the base's entries a file over it must match (read once, if ever:
    base_entries maps each path of the base's tree to its (mode, blob id))."""

    def __init__(self, limit: int, base_entries: Callable[[], dict[bytes, tuple[int, bytes]]]) -> None:
        self.limit, self._base_entries = limit, base_entries

    def require_base_holds(self, path: bytes, sha: bytes, size: int) -> None:
        """Refused ``file-too-large`` unless the base holds exactly this content at path (the user's own file)."""

        if self._base_entries().get(path, (0, b""))[1] == sha:
            return
        raise Refused(Code.FILE_TOO_LARGE, f"{quote_path(path)} is {size} bytes ({format_size(size)}), more than "
                                           f"[candidates] max_file_size ({format_size(self.limit)}); nothing was "
                                           "pinned: delete it or ignore it (.gitignore), or raise the limit")


def large_file_id(path: bytes, size: int) -> bytes:
    """The blob id of the file at path (never through a symlink, never a FIFO: regular_files.open_regular), read a
    chunk at a time; ValueError when it does not hold size bytes, NotRegular when it is no regular file."""

    fd = open_regular(path)
    try:
        return file_blob_id(fd, size)
    finally:
        os.close(fd)


def require_small_history(source, target, head: str, tree: str, limit: int) -> None:  # noqa: ANN001
    """Refused ``file-too-large`` when head's history (or tree) holds a blob over limit that target lacks: a large
    file committed in the workspace and deleted again would otherwise come home with the candidate's history."""

    found = oversized_blobs(source, target, head, tree, limit)
    if found:
        sha, size = max(found, key=lambda item: item[1])
        raise Refused(Code.FILE_TOO_LARGE, f"the workspace's commits hold blob {sha.decode()} of {size} bytes "
                                           f"({format_size(size)}), more than [candidates] max_file_size "
                                           f"({format_size(limit)}), though no file of its tree does now; nothing "
                                           "was pinned: rewrite those commits without it, or raise the limit")
