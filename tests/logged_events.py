"""A ledger's events as `docket log --json` lists them, read in the test's own process.

Tests look at the ledger often, many of them polling; a `docket log` process per look cost about 170 ms of CPU,
a tenth of the suite's. This reads the ledger file with the functions docket log itself reads it with, and
tests/e2e/test_log_stream.py holds the two listings equal.
"""

from __future__ import annotations

import json
from pathlib import Path

from docket.adapters.world.ledger.ledger_rows import read_events, read_only


def logged_events(ledger: Path) -> list[dict]:
    """Every event of the SQLite ledger at ledger: position, stream, version, type, recorded_at, payload."""
    with read_only(ledger) as conn:
        rows = list(read_events(conn))
    return [{"position": position, "stream": stream, "version": version, "type": type_,
             "recorded_at": body["recorded_at"], "payload": body["payload"]}
            for position, stream, version, type_, state in rows for body in [json.loads(state)]]
