"""The views' head is read in one piece: another process moving the views between two reads is no "rewritten ledger".

Found by three concurrent `docket candidate pin`: one process read the views'
position, another committed the next batch, and the first then read the new
digest, compared it with the ledger's digest at the old position, and reported
`ledger-rewritten`. The other process is simulated exactly: its commit happens
right after the first read of the views' meta table.
"""

from __future__ import annotations

import sqlite3

from docket.adapters.service_layer.kernel.projector import catch_up, views_anchor_break
from docket.adapters.world.ledger.reader import SqliteLedgerReader
from docket.projections.views import Views


class MovedBetweenReads:
    """A views connection on which another process commits a batch just after the first read of the meta table."""

    def __init__(self, conn: sqlite3.Connection, move):  # noqa: ANN001
        self.conn, self.move, self.moved = conn, move, False

    def execute(self, sql: str, *args):  # noqa: ANN002, ANN201
        result = self.conn.execute(sql, *args)
        if "projection_position" in sql and not self.moved:
            rows = result.fetchall()
            self.moved = True
            self.move()
            return _Rows(rows)
        return result

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.conn, name)


class _Rows(list):
    def fetchone(self):  # noqa: ANN201
        return self[0] if self else None

    def fetchall(self):  # noqa: ANN201
        return list(self)


def test_views_moved_by_another_process_mid_check_are_not_a_rewritten_ledger(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    for n in range(3):
        docket("task", "plan", "r1", "--title", f"t{n}", "--id", f"t{n}")
    views_path = docket.cwd / ".git" / "docket" / "views.sqlite"
    ledger = SqliteLedgerReader(sqlite3.connect(docket.ledger))
    head = ledger.head_position()
    other = Views(sqlite3.connect(views_path), str(views_path))
    mine = Views(sqlite3.connect(views_path), str(views_path))
    # both start with the views one event behind the ledger: rebuild them to head - 1
    other.ensure_schema(reset=True)
    catch_up(ledger, other, until=head - 1)
    mine.conn = MovedBetweenReads(mine.conn, lambda: catch_up(ledger, other))

    assert views_anchor_break(ledger, mine) is None
    assert mine.conn.moved and other.position() == head
