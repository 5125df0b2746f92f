"""The ledger's events as `docket log` lists them, read as a stream: all, or a run's through the views' index."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.kernel.canonical import canonical_json
from ....domain.kernel.errors import DocketError, VerificationFailed
from ....projections import run_events
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from .ports import LedgerReader, Row

__all__ = ["belongs_to_run", "listed_events", "run_rows"]


def listed_events(ledger: LedgerReader, views_path: Path, *, run_id: str | None, topics: Sequence[str], after: int,
                  until: int, lock_timeout: Callable[[], float]) -> Iterator[tuple[Row, dict[str, Any]]]:
    """Each event in (after, until] of run_id (any run when None) and of one of topics (any when empty),
    with its decoded body {"payload": ..., "recorded_at": ...}, in ledger order.

    A stored body that is not docket's JSON stops the listing with VerificationFailed
    ('ledger-unverifiable'): what cannot be read cannot have been verified.
    """
    if run_id is None:
        rows = ledger.events(after=after, until=until, topics=topics)
    else:
        rows = run_rows(ledger, views_path, run_id, after=after, until=until, lock_timeout=lock_timeout)
    for row in rows:
        if topics and row[3] not in topics:
            continue
        body = _body(row)
        if run_id is None or belongs_to_run(row, body["payload"], run_id):
            yield row, body


def _body(row: Row) -> dict[str, Any]:
    try:
        body = json.loads(row[4])
        if isinstance(body, dict) and isinstance(body.get("payload"), dict) and "recorded_at" in body:
            return body
    except (ValueError, TypeError):
        pass
    raise VerificationFailed(Code.LEDGER_UNVERIFIABLE, f"position {row[0]}: the stored event is not docket's JSON; "
                                                    "nothing more is listed (run 'docket verify')")


def belongs_to_run(row: Row, payload: dict, run_id: str) -> bool:
    return payload.get("run_id") == run_id or row[1] == run_events.RUN_STREAM_PREFIX + run_id


def run_rows(ledger: LedgerReader, views_path: Path, run_id: str, *, after: int, until: int,
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
            yield from ledger.events_at(positions)
            return
    needle = b'"run_id":' + canonical_json(run_id)
    stream = run_events.RUN_STREAM_PREFIX + run_id
    for row in ledger.events(after=after, until=until):
        if row[1] == stream or needle in row[4]:
            yield row


def _indexed_positions(ledger: LedgerReader, views_path: Path, run_id: str, until: int,
                       lock_timeout: Callable[[], float]) -> list[int] | None:
    from .view_freshness import current_views

    views = current_views(ledger, views_path)  # already at the head: read-only, nothing more to import
    try:
        if views is None:
            from .projector import catch_up, open_views

            views = open_views(views_path, timeout=lock_timeout())
            if catch_up(ledger, views) < until:
                return None
        return views.run_positions(run_id, until=until)
    except (OSError, DocketError):  # e.g. views of a rewritten ledger: scan instead
        return None
    finally:
        if views is not None:
            views.conn.close()
