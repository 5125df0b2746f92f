"""3. rebuild: projection rebuild against a plain read and decode of the same events.

Every read model is rebuilt from position 1 with docket's own projector
(``open_views`` + ``catch_up``, 5,000 events per views transaction), into an
in-memory views database and into a fresh views file (WAL, synchronous
NORMAL, as ``docket`` opens it). Baseline: a plain ``sqlite3`` read of the
same rows (position, stream, version, type, state) with ``json.loads`` of
each state, the least any projector does per event. The three take turns;
ratio = baseline time / rebuild time. The ledger is the cached mixed ledger:
runs opened and base-pinned, tasks, workers, leases granted / renewed /
released, workers relaunched, runs completed; renewals are most of it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from docket.adapters.service_layer.kernel.projector import catch_up, open_views
from docket.adapters.world.ledger.reader import SqliteLedgerReader

from .common import Row, cached_ledger, interleaved, log, median, read_only, remove, spread, temp_dir

GOAL = 0.25
ROUNDS = 3


def rebuild(ledger: Path, views_path: str) -> int:
    views = open_views(views_path)
    try:
        with read_only(ledger) as conn:
            return catch_up(SqliteLedgerReader(conn), views)
    finally:
        views.conn.close()


def rebuild_to_file(ledger: Path) -> int:
    folder = temp_dir()
    try:
        return rebuild(ledger, str(folder / "views.sqlite"))
    finally:
        remove(folder)


def read_and_decode(ledger: Path) -> int:
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        count = 0
        loads = json.loads
        for _position, _stream, _version, _type, state in conn.execute(
                "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events ORDER BY rowid"):
            loads(state)
            count += 1
        return count
    finally:
        conn.close()


def run(quick: bool) -> list[Row]:
    size = 50_000 if quick else 200_000
    path = cached_ledger(size)
    assert rebuild(path, ":memory:") == size == read_and_decode(path)  # warm-up: the file is in the page cache
    times = interleaved({"plain": lambda: read_and_decode(path), "memory": lambda: rebuild(path, ":memory:"),
                         "file": lambda: rebuild_to_file(path)}, ROUNDS)
    plain, memory, file = (median(times[k]) for k in ("plain", "memory", "file"))
    log(f"rebuild: {size / memory:,.0f} ev/s in memory, {size / file:,.0f} ev/s to a file, "
        f"plain read + json.loads {size / plain:,.0f} ev/s")
    return [
        Row("rebuild", f"plain read + json.loads of each state, {size:,} events, median of {ROUNDS} "
                       f"({spread(times['plain'])})", size / plain, "events/s"),
        Row("rebuild", f"catch_up into ':memory:' views, {size:,} mixed events ({spread(times['memory'])})",
            size / memory, "events/s", ratio=plain / memory, goal=f">= {GOAL}x plain", passed=plain / memory >= GOAL),
        Row("rebuild", f"catch_up into a views file, {size:,} mixed events ({spread(times['file'])})",
            size / file, "events/s", ratio=plain / file, goal=f">= {GOAL}x plain", passed=plain / file >= GOAL),
    ]
