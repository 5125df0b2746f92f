"""This machine's host id: which processes, workspaces and leases are its own when several machines share a ledger."""

from __future__ import annotations

import os
import re
import socket
from ....domain.kernel.codes import Code

__all__ = ["host_id"]

_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def host_id() -> str:
    """DOCKET_HOST, else the hostname: recorded in every process identity (WorkerLaunched, RunSupervised). Processes
    of another host id are never looked at (unknown, never dead), so two supervisors given two ids on one machine
    are two hosts to each other. BadInput ``bad-host`` for an id that is not 1 to 128 letters, digits, '.', '_' or
    '-' starting with a letter or digit."""
    chosen = os.environ.get("DOCKET_HOST")
    if chosen is None:
        return socket.gethostname() or "localhost"
    if not _HOST.fullmatch(chosen):
        from ....domain.kernel.errors import BadInput

        raise BadInput(Code.BAD_HOST, f"DOCKET_HOST={chosen[:200]!r} is not a host id: 1 to 128 letters, digits, "
                                   "'.', '_' or '-', starting with a letter or digit")
    return chosen
