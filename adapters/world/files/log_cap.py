"""A process's log kept under its cap: its head and its tail, the middle cut, a line saying how much was cut.

A process writes its log directly (its stdout and stderr are the log file, opened O_APPEND), so docket caps it in
place from outside: when the file is over the cap, the last part is copied to just after the head and a marker
line, and the file is truncated there; the process's next write lands at the new end. The number of bytes cut
so far is kept beside the log (``<log>.cut``, docket's to write, never the process's), so a supervisor that
takes over after a crash goes on counting, and the ledger records it (WorkerExited's ``log_cut_bytes``).

What the process writes while the tail is copied is copied after it (a few rounds, each shorter than the last);
only what lands between the last look at the size and the truncate is lost uncounted: microseconds, a few KiB a
cut of a flood as fast as the disk takes it.
Everything else is either kept or counted as cut (tests/integration/test_sizes_log_cap.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ....domain.kernel.values import DEFAULT_MAX_LOG

__all__ = ["DEFAULT_MAX_LOG", "MARKER_BYTES", "cap_log", "cut_due", "cut_so_far", "marker"]

MARKER_BYTES = 96  # the marker line's fixed length: rewritten in place as the count grows
_COPY = 1 << 20
_CATCH_UP = 16  # rounds of catching up with a writer before the truncate


def marker(cut: int) -> bytes:
    """The line between a capped log's head and its tail."""
    text = f"\n[docket: {cut} bytes of output cut here, to keep this log under its max_log]"
    return text.encode("ascii").ljust(MARKER_BYTES - 1) + b"\n"


def _least_cap(cap: int) -> int:
    """The cap a log is kept under: at least room for a head, the marker and a tail."""
    return max(cap, 4 * MARKER_BYTES)


def cut_due(size: int, cap: int, *, quiet: bool) -> bool:
    """Whether a running process's log of size bytes is cut now: during a flood once it is a quarter over its cap
    (cutting at every write would copy the tail again and again), and as soon as it is quiet while over the cap
    (a flood that ended between two cuts would otherwise stay over the cap until the process exits)."""
    cap = _least_cap(cap)  # a smaller max_log is raised by the cut too: never due for a cut that cuts nothing
    return size > cap + cap // 4 or (quiet and size > cap)


def _cut_path(log: Path) -> Path:
    return log.with_name(log.name + ".cut")


def cut_so_far(log: Path) -> int:
    """The bytes cut from the log so far (0: it is whole, or the count cannot be read)."""
    try:
        fd = os.open(_cut_path(log), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        text = os.read(fd, 32) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)
    return int(text) if text.strip().isdigit() else 0


def _record_cut(log: Path, cut: int) -> None:
    path = _cut_path(log)
    draft = path.with_name(path.name + f".{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, b"%d\n" % cut)
    finally:
        os.close(fd)
    os.replace(draft, path)


def cap_log(log: Path, cap: int, *, slack: int = 0) -> int:
    """Bring the log to at most cap bytes (plus the marker's few) when it is over cap + slack, keeping its first
    half and its last part; the bytes cut so far. Never follows a symlink; anything but a regular file is left
    alone. A cap too small to hold a head, the marker and a tail is raised to one that can."""
    cap = _least_cap(cap)
    try:
        fd = os.open(log, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return cut_so_far(log)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size <= cap + slack:
            return cut_so_far(log) if stat.S_ISREG(info.st_mode) else 0
        before = cut_so_far(log)
        head = cap // 2
        body = head + MARKER_BYTES  # where the kept tail starts
        keep = cap - body
        size = os.fstat(fd).st_size
        cut = before + (size - keep - (body if before else head))
        _copy_down(fd, size - keep, body, keep)
        end = body + keep
        for _ in range(_CATCH_UP):  # what the process wrote while the tail was copied is kept too
            now = os.fstat(fd).st_size
            if now <= size:
                break
            _copy_down(fd, size, end, now - size)
            end, size = end + now - size, now
        os.pwrite(fd, marker(cut), head)
        os.ftruncate(fd, end)
    finally:
        os.close(fd)
    _record_cut(log, cut)
    return cut


def _copy_down(fd: int, source: int, target: int, length: int) -> None:
    """Copy length bytes from source to target (target before source: front to back never overwrites unread)."""
    done = 0
    while done < length:
        chunk = os.pread(fd, min(_COPY, length - done), source + done)
        if not chunk:
            break
        os.pwrite(fd, chunk, target + done)
        done += len(chunk)
