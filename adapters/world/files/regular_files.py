"""Files of a workspace opened as what they claim to be: regular files, never through a symlink, never blocking.

Everything in an agent's workspace is the agent's to replace between docket's lstat and its open: a FIFO where a
file was blocks a plain open forever (and `docket go` with it, deaf to SIGTERM, on every resume), a device reads
without end. Every file docket reads from a workspace is opened here.
"""

from __future__ import annotations

import os
import stat

__all__ = ["NotRegular", "open_regular"]


class NotRegular(OSError):
    """What a workspace names as a file is not a regular file when opened (a FIFO, a device, a socket)."""


def open_regular(path: bytes | str) -> int:
    """A blocking descriptor on the regular file at path, opened without following a symlink and without blocking
    (O_NONBLOCK: a FIFO opens at once, to be refused). NotRegular when it is not a regular file; OSError when it
    cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(f"{os.fsdecode(path)} is not a regular file")
        os.set_blocking(fd, True)  # a regular file never blocks: read as usual
    except BaseException:
        os.close(fd)
        raise
    return fd
