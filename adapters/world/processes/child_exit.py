"""A synchronous wait that a child process's exit ends at once (a Linux pidfd turns readable when it ends).

Waiting loops that must also look at something else now and then (a timeout, a log's growth) wait here instead of
sleeping their whole poll interval: the exit is noticed when it happens, not at the next poll. Where there is no
pidfd (an old kernel, another system, a child already reaped) the wait is a plain sleep, as before.
"""

from __future__ import annotations

import os
import select
import time
from typing import Any

__all__ = ["ChildExit"]


class ChildExit:
    """The exit of one child (a subprocess.Popen not yet reaped: its pid cannot name another process meanwhile)."""

    def __init__(self, popen: Any):
        self.fd: int | None = None
        if popen.returncode is None:  # reaped already: its pid may be someone else's by now
            try:
                self.fd = os.pidfd_open(popen.pid)
            except (AttributeError, OSError):
                self.fd = None

    def wait(self, seconds: float) -> None:
        """Return after seconds, or as soon as the child has ended."""
        if self.fd is None:
            time.sleep(seconds)
            return
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.poll(max(0, int(seconds * 1000)))

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> ChildExit:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
