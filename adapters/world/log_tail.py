"""A running agent's last line of output, read from the end of its log: what the live board shows for it."""

from __future__ import annotations

import os
import stat

__all__ = ["last_output_line"]

TAIL_BYTES = 4096
LINE_CHARS = 200


def last_output_line(path: str) -> str | None:
    """The last non-blank line in the last 4 KiB of a log (its last 200 characters), never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device in its place is not read
            return None
        data = os.pread(fd, TAIL_BYTES, max(0, info.st_size - TAIL_BYTES))
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][-LINE_CHARS:] if lines else None
