"""A process's log, read without following a symlink: its digest, size and bounded tail, its size now, its last line.

What an agent's or a check's end records (``log_summary``), what resets a worker's
idle timer (``log_size``), and what the live board shows of a running agent
(``last_output_line``). What is kept is redacted by shape and by value
(``known_secrets``: the values docket withholds from agents, or lets through
env_allow, read from its own environment).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ....domain.containment.processes import bounded_tail, last_line, redact, secret_values
from .log_cap import cut_so_far

__all__ = ["LogSummary", "known_secrets", "last_output_line", "log_size", "log_summary"]

TAIL_BYTES = 4096
LINE_CHARS = 200


def known_secrets() -> tuple[str, ...]:
    """The secret values of docket's own environment, as domain.processes.secret_values chooses them: redacted by
    value wherever output is kept, whichever agent's env_allow let one through."""
    return secret_values(os.environ)


def last_output_line(path: str) -> str | None:
    """The last non-blank line in the last 4 KiB of a log (its last 200 characters), never through a symlink,
    redacted. Its characters are kept as printed (a carriage return ends a line, as on a terminal): --json carries
    them exactly, and every renderer escapes them."""
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
    lines = [line for line in redact(data.decode("utf-8", "replace"), known_secrets()).splitlines() if line.strip()]
    return lines[-1][-LINE_CHARS:] if lines else None


@dataclass(frozen=True)
class LogSummary:
    sha256: str | None
    size: int | None
    tail: str
    last_line: str
    end: bytes = b""  # its last 64 KiB, as written
    cut: int = 0  # bytes cut from its middle to keep it under its cap (log_cap.py)


def log_summary(log_path: Path | None) -> LogSummary:
    """The log's digest, size and bounded, redacted tail, read without following a symlink."""
    if log_path is None:
        return LogSummary(None, None, "", "")
    try:
        fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return LogSummary(None, None, "", "")
    digest, size, end = hashlib.sha256(), 0, b""
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
            end = (end + chunk)[-65536:]

    secrets = known_secrets()
    return LogSummary(digest.hexdigest(), size, bounded_tail(end, secrets=secrets), last_line(end, secrets), end,
                      cut_so_far(Path(log_path)))


def log_size(path: os.PathLike[str]) -> int:
    """The log's size now (0 when it cannot be read): output resets the idle timer."""
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return 0
