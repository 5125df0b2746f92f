"""What the tests ask of a process by its id."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """The process runs: it exists and is no zombie (one that exited and was not yet reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
