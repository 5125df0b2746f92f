"""A bound on the number of processes one launch may have at once: the cgroup pids controller, where writable.

A launched process is moved, while it is still held at its gate (before any of
its own code runs), into a cgroup of its own, ``docket-<launch>``, made beside
docket's in the pids hierarchy, with ``pids.max`` = PIDS_MAX. Everything it
starts stays in that cgroup (a process cannot leave a cgroup it cannot write,
and the sandbox gives it no write access to /sys), so a fork bomb stops at the
bound, and the cgroup lists every process of the launch, however detached.

Where: cgroup v1's pids hierarchy, or a cgroup v2 folder that delegates the
pids controller to its children, either writable by docket's user. Elsewhere
(a systemd session whose scope docket may not write, macOS) there is no such
bound: ``RLIMIT_NPROC`` counts every process of the user, not the launch's, and
does not bind root, so it is not used. Nothing here fails a launch: no bound is
the fallback, and the caller is told (None).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["PIDS_MAX", "PidsLimit"]

PIDS_MAX = 1024  # parallel builds and test runners stay far below it; a fork bomb stops there
_ROOT = Path("/sys/fs/cgroup")


def _own_pids_cgroup() -> Path | None:
    """The folder of this process's cgroup that may hold a pids-limited child, if any."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # cgroup v1
            folder = _ROOT / "pids" / path.lstrip("/")
            return folder if folder.is_dir() else None
    for line in lines:
        if line.startswith("0::"):  # cgroup v2: its children get pids only if this folder delegates it
            for base in (_ROOT, _ROOT / "unified"):
                folder = base / line[3:].lstrip("/")
                try:
                    if "pids" in (folder / "cgroup.subtree_control").read_text().split():
                        return folder
                except OSError:
                    continue
    return None


class PidsLimit:
    """One launch's cgroup, pids.max set; None from ``make`` where none can be made."""

    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def make(cls, name: str, limit: int = PIDS_MAX) -> PidsLimit | None:
        parent = _own_pids_cgroup()
        if parent is None or not os.access(parent, os.W_OK):
            return None
        folder = parent / f"docket-{name}"
        try:
            folder.mkdir(exist_ok=True)
            (folder / "pids.max").write_text(f"{limit}\n")
        except OSError:
            try:
                folder.rmdir()
            except OSError:
                pass
            return None
        return cls(folder)

    def add(self, pid: int) -> bool:
        """Move pid (held at its gate) into the cgroup; whether it is there."""
        try:
            (self.folder / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            return False
        return True

    def members(self) -> list[int]:
        try:
            return [int(line) for line in (self.folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def empty_and_remove(self, reap: Callable[[], object], wait: float = 10.0) -> bool:
        """SIGKILL whatever is still in the cgroup (reap: what lets this process reap its own), until it is empty
        or wait has passed; then remove it. Whether nothing is left in it."""
        deadline = time.monotonic() + wait
        while (members := self.members()) and time.monotonic() < deadline:
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            reap()
            time.sleep(0.01)
        return self.remove() or not self.members()

    def remove(self) -> bool:
        """Remove the cgroup once it is empty; whether it is gone."""
        try:
            self.folder.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True
