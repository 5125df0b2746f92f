"""3. rebuild: projection rebuild rate over a mixed ledger.

Every read model is rebuilt from position 1 with docket's own projector
(``open_views`` + ``catch_up``, 5,000 events per views transaction), into an
in-memory views database and into a fresh views file (WAL, synchronous
NORMAL, as ``docket`` opens it). The ledger is the cached mixed ledger: runs
opened and base-pinned, tasks, workers, leases granted / renewed / released,
workers relaunched, runs completed; renewals are most of it.
"""

from __future__ import annotations

from pathlib import Path

from docket.adapters.projector import catch_up, open_views

from .common import Row, cached_ledger, log, median, read_only, remove, temp_dir, timed

GOAL = 50_000


def rebuild(ledger: Path, views_path: str) -> int:
    views = open_views(views_path)
    try:
        with read_only(ledger) as conn:
            return catch_up(conn, views)
    finally:
        views.conn.close()


def run(quick: bool) -> list[Row]:
    size = 50_000 if quick else 200_000
    path = cached_ledger(size)
    assert rebuild(path, ":memory:") == size  # warm-up: the ledger file is in the page cache
    memory_t, file_t = [], []
    for _ in range(3):
        memory_t.append(timed(lambda: rebuild(path, ":memory:")))
        folder = temp_dir()
        try:
            file_t.append(timed(lambda views=str(folder / "views.sqlite"): rebuild(path, views)))
        finally:
            remove(folder)
    memory_rate, file_rate = size / median(memory_t), size / median(file_t)
    log(f"rebuild: {memory_rate:,.0f} ev/s in memory, {file_rate:,.0f} ev/s to a file")
    return [
        Row("rebuild", f"catch_up into ':memory:' views, {size:,} mixed events", memory_rate, "events/s",
            goal=f">= {GOAL:,} ev/s", passed=memory_rate >= GOAL),
        Row("rebuild", f"catch_up into a views file, {size:,} mixed events", file_rate, "events/s",
            goal=f">= {GOAL:,} ev/s", passed=file_rate >= GOAL),
    ]
