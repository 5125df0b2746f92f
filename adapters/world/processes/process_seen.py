"""What this host shows of a process: one read of /proc/<pid>/stat (psutil elsewhere), a group's members, the boot."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ....domain.containment.processes import ProcessIdentity

_PROC = Path("/proc")
_LINUX = sys.platform.startswith("linux")


@dataclass(frozen=True)
class _Seen:
    """What this host shows at a pid right now (Linux: one read of /proc/<pid>/stat)."""

    pgid: int
    start_time: str
    zombie: bool


def _seen(pid: int) -> _Seen | None | Exception:
    """The process at pid, None if there is none, or the error that kept us from telling."""
    if _LINUX:
        try:
            stat = (_PROC / str(pid) / "stat").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            return None
        except OSError as error:
            return error
        fields = stat[stat.rindex(b")") + 2:].split()  # the name before it may hold spaces and parens
        # fields[0] is field 3 (state), so field n of proc(5) is fields[n - 3]
        return _Seen(pgid=int(fields[2]), start_time=fields[19].decode(), zombie=fields[0] == b"Z")
    import psutil

    try:
        process = psutil.Process(pid)
        return _Seen(pgid=os.getpgid(pid), start_time=repr(process.create_time()),
                     zombie=process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return None
    except (psutil.Error, OSError) as error:
        return error


def _group_members(pgid: int) -> list[_Seen]:
    """Every process this host shows in process group pgid."""
    if _LINUX:
        members = []
        for entry in os.scandir(_PROC):
            if entry.name.isdigit() and isinstance(seen := _seen(int(entry.name)), _Seen) and seen.pgid == pgid:
                members.append(seen)
        return members
    import psutil

    return [seen for pid in psutil.pids() if isinstance(seen := _seen(pid), _Seen) and seen.pgid == pgid]


def _started_no_earlier(seen: _Seen, identity: ProcessIdentity) -> bool:
    try:
        return float(seen.start_time) >= float(identity.start_time)
    except ValueError:
        return False


def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        import psutil

        return f"boot-{int(psutil.boot_time())}"
