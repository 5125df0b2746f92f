"""Application functions over the in-memory LedgerReader: views at a position, log's run filter, log's stream."""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from types import SimpleNamespace

import pytest

from docket.adapters.service_layer.kernel.event_log import listed_events
from docket.adapters.service_layer.kernel.view_freshness import views_at
from tests.fakes.ledger_reader import FakeLedgerReader
from docket.cli.console import output
from docket.domain.kernel.errors import NotFound, VerificationFailed
from docket.domain.events import RunCompleted, RunOpened, TaskPlanned
from docket.projections import runs, tasks

from .builders import T0, at


def _reader() -> FakeLedgerReader:
    reader = FakeLedgerReader()
    for event in [
        RunOpened(stream="run:r1", version=1, recorded_at=at(1000), run_id="r1", goal="g", target_branch="main",
                  budget_ms=None),
        RunOpened(stream="run:r2", version=1, recorded_at=at(2000), run_id="r2", goal="h", target_branch="main",
                  budget_ms=None),
        TaskPlanned(stream="task:t1", version=1, recorded_at=at(3000), task_id="t1", run_id="r1", title="x"),
        RunCompleted(stream="run:r1", version=2, recorded_at=at(4000), run_id="r1"),
    ]:
        reader.append(event.stream, event.type_name(), event.payload(), event.recorded_at)
    return reader


def test_views_at_a_position_or_a_time_read_through_the_port():
    reader = _reader()
    views, then = views_at(reader, "3")
    assert then == at(3000) and views.position() == 3
    assert [(r["run_id"], r["status"]) for r in runs.list_runs(views.conn)] == [("r1", "opening"), ("r2", "opening")]
    assert [t["task_id"] for t in tasks.tasks_of(views.conn, "r1")] == ["t1"]
    views.conn.close()
    views, then = views_at(reader, at(1500))
    assert then == at(1500) and views.position() == 1 and views.digest() == reader.digest_at(1)
    views.conn.close()
    with pytest.raises(NotFound) as missing:
        views_at(reader, "5")
    assert missing.value.code == "position-not-found"


@pytest.mark.parametrize("views", ["beside", "unusable"])
def test_the_logs_run_filter_through_the_index_or_a_scan(tmp_path, views):
    reader = _reader()
    views_path = tmp_path / "views.sqlite" if views == "beside" else tmp_path  # a folder: no views, so a scan

    def listed(run_id, topics=(), after=0):
        return [row[0] for row, _body in listed_events(reader, views_path, run_id=run_id, topics=list(topics),
                                                         after=after, until=4, lock_timeout=lambda: 5)]

    assert listed("r1") == [1, 3, 4] and listed("r2") == [2] and listed("r3") == []
    assert listed(None) == [1, 2, 3, 4] and listed(None, ["RunOpened.v1"]) == [1, 2]
    assert listed("r1", ["RunCompleted.v1"]) == [4] and listed("r1", after=1) == [3, 4]
    assert views_path.is_file() == (views == "beside")  # the index was brought up to the head and used


def test_a_stored_event_that_is_not_dockets_json_stops_the_listing():
    reader = _reader()
    position, stream, version, type_, _state = reader.rows[2]
    reader.rows[2] = (position, stream, version, type_, b'{"payload": [')
    rows = listed_events(reader, None, run_id=None, topics=[], after=0, until=4, lock_timeout=lambda: 5)
    assert [row[0] for row, _ in (next(rows), next(rows))] == [1, 2]
    with pytest.raises(VerificationFailed) as damaged:
        next(rows)
    assert damaged.value.code == "ledger-unverifiable" and "position 3" in damaged.value.message


class _FailingAfter(FakeLedgerReader):
    """Reads that fail after some rows, as a damaged page of a real file does."""

    def __init__(self, rows: int):
        super().__init__()
        self.good = rows

    def events(self, **kwargs):
        for n, row in enumerate(super().events(**kwargs)):
            if n == self.good:
                raise sqlite3.DatabaseError("database disk image is malformed")
            yield row


@pytest.mark.parametrize("good", [0, 2])
def test_log_json_that_fails_midway_stays_one_document_ending_with_the_error(monkeypatch, good):
    from docket.cli.supervise.log_command import log

    reader = _FailingAfter(good)
    reader.rows, reader.digests = (source := _reader()).rows, source.digests
    args = SimpleNamespace(run=None, type=None, follow=False)
    ctx = SimpleNamespace(args=args, json=True, ledger_reader=reader, paths=SimpleNamespace(views=None),
                          lock_timeout=5)
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(output, "_emitted", False)
    monkeypatch.setattr(output, "_unfinished", None)
    with pytest.raises(sqlite3.DatabaseError) as failed:
        log(ctx)
    output.emit_error("database", str(failed.value), True)  # as cli/app.py translates it
    doc = json.loads(out.getvalue())  # one valid document, not a broken one followed by a second
    assert [e["position"] for e in doc["events"]] == list(range(1, good + 1))
    assert doc["error"] == {"code": "database", "message": "database disk image is malformed"}
    assert doc["head"] == 4
    assert err.getvalue() == "docket: error: database: database disk image is malformed\n"
