"""Who a process is, beyond its pid: (host, boot, pid, process group, start time).

Its own module, apart from the rest of processes.py (liveness, secrets, redaction): the aggregates that record
processes need only this, and a write command should not compile the redaction's patterns to fold a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ProcessIdentity"]


@dataclass(frozen=True)
class ProcessIdentity:
    """A process for sure: a pid alone can be reused, (boot, pid, start time) cannot."""

    host: str  # socket.gethostname() of the machine it runs on
    boot_id: str  # Linux: /proc/sys/kernel/random/boot_id; elsewhere "boot-<boot time>"
    pid: int
    pgid: int
    start_time: str  # Linux: field 22 of /proc/<pid>/stat (clock ticks since boot); elsewhere psutil's create_time

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "boot_id": self.boot_id, "pid": self.pid, "pgid": self.pgid,
                "start_time": self.start_time}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProcessIdentity:
        return cls(host=str(d["host"]), boot_id=str(d["boot_id"]), pid=int(d["pid"]), pgid=int(d["pgid"]),
                   start_time=str(d["start_time"]))
