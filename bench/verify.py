"""2. verify: docket's chain verification rate against the raw read rate.

docket: ``read_chain_rows`` + ``verify_chain`` on a read-only sqlite3
connection, exactly what ``docket verify`` does inside (the whole
``docket verify --ledger FILE`` process is also timed once, for reference).
raw: the library's own recorder on the same file, paging through every
notification with ``recorder.select_notifications(start, 1000)``.
Both are warmed once (the file is in the page cache) and the best of three
runs is kept.
"""

from __future__ import annotations

from pathlib import Path

from eventsourcing.application import Application

from docket.domain.chain import verify_chain

from .common import BIN, Row, cached_ledger, log, read_chain_rows, read_only, run_process, timed

GOAL = 0.8
PAGE = 1000


def docket_verify(path: Path) -> int:
    with read_only(path) as conn:
        head, broken = verify_chain(read_chain_rows(conn))
    assert broken is None, broken
    return head.position


def raw_read(path: Path) -> int:
    app = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path),
                           "ORIGINATOR_ID_TYPE": "text"})
    try:
        count, start = 0, 1
        while page := app.recorder.select_notifications(start, PAGE):
            count += len(page)
            start = page[-1].id + 1
        return count
    finally:
        app.close()


def run(quick: bool) -> list[Row]:
    size = 50_000 if quick else 200_000
    path = cached_ledger(size)
    assert docket_verify(path) == size and raw_read(path) == size  # warm-up and sanity check
    verify_t, raw_t = [], []
    for _ in range(3):
        verify_t.append(timed(lambda: docket_verify(path)))
        raw_t.append(timed(lambda: raw_read(path)))
    verify_rate, raw_rate = size / min(verify_t), size / min(raw_t)
    process = run_process([str(BIN / "docket"), "verify", "--ledger", str(path)])
    log(f"verify: {verify_rate:,.0f} ev/s, raw {raw_rate:,.0f} ev/s, process {process:.2f} s")
    ratio = verify_rate / raw_rate
    return [
        Row("verify", f"raw select_notifications, {size:,} events", raw_rate, "events/s"),
        Row("verify", f"docket read_chain_rows + verify_chain, {size:,} events", verify_rate, "events/s",
            ratio=ratio, goal=f">= {GOAL}x raw", passed=ratio >= GOAL),
        Row("verify", f"'docket verify' whole process, {size:,} events", process, "s"),
        Row("verify", "  = events/s of the whole process", size / process, "events/s"),
    ]
