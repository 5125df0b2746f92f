"""The ledger's events as `docket log` lists them, read as a stream: all, or a run's through the views' index."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from ...domain.canonical import canonical_json
from ...domain.errors import DocketError
from ...projections import run_events
from ..world.reader import read_events, read_events_at

__all__ = ["Row", "belongs_to_run", "run_rows"]

Row = tuple[int, str, int, str, bytes]  # position, stream, version, type, state


def belongs_to_run(row: Row, payload: dict, run_id: str) -> bool:
    return payload.get("run_id") == run_id or row[1] == run_events.RUN_STREAM_PREFIX + run_id


def run_rows(ledger: sqlite3.Connection, views_path: Path, run_id: str, *, after: int, until: int,
             lock_timeout: Callable[[], float]) -> Iterator[Row]:
    """Rows that may belong to run_id in (after, until], in ledger order; the caller keeps those belonging_to_run.

    From position 0, through the views' run index when the views file is at the
    ledger's head or can be brought there (reading only the run's rows); otherwise,
    or when the views cannot be used, a scan that keeps only rows naming the run or
    its stream. ``lock_timeout()``: seconds to wait for the views' write lock.
    """
    if after == 0:
        positions = _indexed_positions(ledger, views_path, run_id, until, lock_timeout)
        if positions is not None:
            yield from read_events_at(ledger, positions)
            return
    needle = b'"run_id":' + canonical_json(run_id)
    stream = run_events.RUN_STREAM_PREFIX + run_id
    for row in read_events(ledger, after=after, until=until):
        if row[1] == stream or needle in row[4]:
            yield row


def _indexed_positions(ledger: sqlite3.Connection, views_path: Path, run_id: str, until: int,
                       lock_timeout: Callable[[], float]) -> list[int] | None:
    from .views import current_views

    views = current_views(ledger, views_path)  # already at the head: read-only, nothing more to import
    try:
        if views is None:
            from .projector import catch_up, open_views

            views = open_views(views_path, timeout=lock_timeout())
            if catch_up(ledger, views) < until:
                return None
        return list(run_events.positions_of(views.conn, run_id, until=until))
    except (OSError, sqlite3.Error, DocketError):  # e.g. views of a rewritten ledger: scan instead
        return None
    finally:
        if views is not None:
            views.conn.close()
