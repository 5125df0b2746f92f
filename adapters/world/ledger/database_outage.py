"""Riding out an outage of the ledger's PostgreSQL database: a connection that cannot be had is tried again.

Only reaching the database is retried, before anything is read or written through the connection: a transaction
that fails once begun (at its commit, say, when whether it committed is unknown) is not, and leaves as StorageFailed
for ``docket go --resume`` and replay to finish. So nothing is ever recorded twice. The wait is bounded by
DOCKET_DATABASE_WAIT (seconds, default 300; 0: fail at once); while it lasts a supervisor records nothing, and a
lease it cannot renew meanwhile may expire and go to another host, as any lease does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DEFAULT_WAIT_SECONDS", "wait_seconds", "waiting_out"]

T = TypeVar("T")
DEFAULT_WAIT_SECONDS = 300
_MAX_PAUSE = 5.0


def wait_seconds() -> float:
    """How long an outage is waited out: DOCKET_DATABASE_WAIT, else 300 s (a value that is not a whole number of
    seconds from 0 to 86400 is the default: this runs deep in a command, after the environment was checked)."""
    raw = os.environ.get("DOCKET_DATABASE_WAIT", "")
    return float(raw) if raw.isascii() and raw.isdigit() and int(raw) <= 86_400 else DEFAULT_WAIT_SECONDS


def waiting_out(connect: Callable[[], T], is_outage: Callable[[BaseException], bool], where: str) -> T:
    """connect(), tried again while it fails with an outage, for up to wait_seconds(); saying so on stderr once
    when the wait begins and once when the database is back. The last failure is raised when the wait ends."""
    deadline = None
    pause = 0.25
    while True:
        try:
            made = connect()
        except Exception as e:
            if not is_outage(e):
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + wait_seconds()
                if now < deadline:
                    _say(f"the ledger's database {where} cannot be reached; waiting up to {wait_seconds():.0f} s "
                         f"for it: {_first_line(e)}")
            if now >= deadline:
                raise
            time.sleep(min(pause, max(deadline - now, 0)))
            pause = min(pause * 2, _MAX_PAUSE)
            continue
        if deadline is not None:
            _say(f"the ledger's database {where} is back")
        return made


def _first_line(error: BaseException) -> str:
    line = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    return "".join(ch if ch.isprintable() else "?" for ch in line)  # a server's text, never a terminal's command


def _say(message: str) -> None:
    try:
        sys.stderr.write(f"docket: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr closed: the wait goes on unsaid
