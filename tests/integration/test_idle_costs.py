"""Idle costs that must not grow with the ledger: the topic index, the run index, log's stream, checkpoints."""

from __future__ import annotations

import io
import json
import sqlite3
import sys

import pytest

from docket.adapters.service_layer.kernel import checkpoints
from docket.adapters.service_layer.kernel.event_log import belongs_to_run, run_rows
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.projector import catch_up, open_views
from docket.adapters.service_layer.kernel.view_freshness import views_at
from docket.adapters.world.ledger.ledger_rows import read_events, read_only
from docket.adapters.world.ledger.reader import ledger_reader
from docket.domain.events import LeaseGranted, LeaseRenewed, RunCompleted, RunOpened, TaskPlanned
from docket.domain.kernel.values import from_ms, to_ms
from docket.projections.views import READ_MODELS

T0 = "2026-01-01T00:00:00.000Z"
INTENT_AND_OUTCOME_TYPES = ("RunBasePinRequested.v1", "RunBasePinned.v1")


def at(i: int) -> str:
    return from_ms(to_ms(T0) + i * 1000)


def mixed(count: int, runs: int = 3) -> list:
    """Runs opened, tasks planned, leases granted then renewed (most events), runs completed, interleaved."""
    events, versions = [], {}

    def add(cls, stream, **payload):
        versions[stream] = versions.get(stream, 0) + 1
        events.append(cls(stream=stream, version=versions[stream], recorded_at=at(len(events) + 1), **payload))

    for r in range(runs):
        add(RunOpened, f"run:r{r}", run_id=f"r{r}", goal="g", target_branch="main", budget_ms=60_000)
    for i in range(count):
        r = i % runs
        lease = f"lease:wt/{r}"
        if i < runs:
            add(TaskPlanned, f"task:t{r}", task_id=f"t{r}", run_id=f"r{r}", title="x")
            add(LeaseGranted, lease, resource=f"wt/{r}", run_id=f"r{r}", worker_id=f"w{r}", generation=1,
                ttl_ms=60_000, expires_at=at(i + 60), supersedes_token=None)
        else:
            add(LeaseRenewed, lease, resource=f"wt/{r}", run_id=f"r{r}", token=2, expires_at=at(i + 60))
    add(RunCompleted, "run:r0", run_id="r0")
    return events


@pytest.fixture
def filled(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append(mixed(300))
    ledger.close()
    return ledger_path


def test_pending_intents_are_looked_up_through_the_topic_index(filled):
    ledger = Ledger(filled)
    with ledger.recorder.datastore.transaction(commit=False) as c:
        sql = ("EXPLAIN QUERY PLAN SELECT rowid, state FROM stored_events WHERE rowid > ? AND topic IN (?, ?) "
               "ORDER BY rowid")
        c.execute(sql, (0, *INTENT_AND_OUTCOME_TYPES))
        plan = " ".join(str(tuple(row)) for row in c.fetchall())
    ledger.close()
    assert "USING INDEX stored_events_topic" in plan


def test_a_ledger_made_before_the_topic_index_gets_it_when_next_opened(filled):
    with sqlite3.connect(filled) as conn:
        conn.execute("DROP INDEX stored_events_topic")
    Ledger(filled).close()
    with read_only(filled) as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'stored_events_topic'").fetchone()


def _by_predicate(path, run_id):
    with read_only(path) as conn:
        return [row[0] for row in read_events(conn) if belongs_to_run(row, json.loads(row[4])["payload"], run_id)]


@pytest.mark.parametrize("run_id", ["r0", "r1", "r-none"])
def test_a_runs_events_through_the_index_are_exactly_those_the_scan_finds(filled, tmp_path, run_id):
    expected = _by_predicate(filled, run_id)
    views_path = tmp_path / "views.sqlite"
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    with ledger_reader(filled) as reader:
        head = reader.head_position()

        def listed(views, after=0):
            rows = run_rows(reader, views, run_id, after=after, until=head, lock_timeout=lambda: 5)
            return [row[0] for row in rows if belongs_to_run(row, json.loads(row[4])["payload"], run_id)]

        through_index = listed(views_path)
        assert views_path.is_file()  # the index was used (the views were brought to the head)
        scanned = listed(blocked)
        later = listed(views_path, after=100)
    assert through_index == scanned == expected
    assert later == [p for p in expected if p > 100]


@pytest.mark.parametrize("count", [0, 1, 3])
def test_log_json_is_written_event_by_event_exactly_as_one_document(monkeypatch, count):
    from docket.cli.supervise.log_command import _write_document

    docs = [{"position": i, "stream": "run:é", "type": "T", "payload": {"goal": "a\nb ✓", "n": [1, {"x": None}]},
             "recorded_at": T0, "version": 1} for i in range(count)]
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    _write_document(iter(docs), 42)
    expected = json.dumps({"events": docs, "head": 42}, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    assert out.getvalue() == expected


def _tables(views):
    return {m.TABLE: views.table_rows(m.TABLE) for m in READ_MODELS}


def test_status_at_from_a_checkpoint_equals_a_rebuild_from_position_one(filled, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "INTERVAL", 40)
    monkeypatch.setattr(checkpoints, "LIMIT", 4)
    views_path = tmp_path / "views.sqlite"
    folder = checkpoints.checkpoint_folder(views_path)
    with ledger_reader(filled) as reader:
        views = open_views(views_path)
        head = catch_up(reader, views)
        views.conn.close()
        kept = checkpoints.positions(folder)
        assert len(kept) == 4 and all(p % 40 == 0 for p in kept) and kept[-1] == head - head % 40
        times = [json.loads(row[4])["recorded_at"] for row in reader.events()]
        for at_ in ["1", "39", "40", "41", str(kept[0] + 7), str(head), times[100], times[-1], "2025-01-01T00:00:00Z"]:
            from_checkpoint, then = views_at(reader, at_, folder)
            from_one, then_one = views_at(reader, at_)
            assert (_tables(from_checkpoint), from_checkpoint.position(), then) == \
                   (_tables(from_one), from_one.position(), then_one), at_
            from_checkpoint.conn.close()
            from_one.conn.close()


def test_a_checkpoint_the_ledger_no_longer_holds_is_not_used(filled, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "INTERVAL", 100)
    views_path = tmp_path / "views.sqlite"
    folder = checkpoints.checkpoint_folder(views_path)
    with ledger_reader(filled) as reader:
        views = open_views(views_path)
        catch_up(reader, views)
        views.conn.close()
    first = checkpoints.positions(folder)[0]
    with sqlite3.connect(folder / f"{first}.sqlite") as ck:  # as if taken from a ledger since rewritten
        ck.execute("UPDATE projection_position SET value = 'f00d' WHERE key = 'digest'")
    with ledger_reader(filled) as reader:
        memory = open_views(":memory:")
        assert checkpoints.start_from_checkpoint(reader, memory, folder, until=first + 50) == 0
        assert memory.position() == 0


def test_views_rebuilt_from_position_one_make_their_checkpoints_afresh(filled, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "INTERVAL", 100)
    views_path = tmp_path / "views.sqlite"
    folder = checkpoints.checkpoint_folder(views_path)
    folder.mkdir()
    (folder / "999999.sqlite").write_bytes(b"")  # a stale one, past this ledger's end
    with ledger_reader(filled) as reader:
        views = open_views(views_path)
        head = catch_up(reader, views)
        views.conn.close()
    assert checkpoints.positions(folder) == list(range(100, head + 1, 100))


def test_select_intent_events_keeps_exactly_the_unresolved_intents_and_their_unknowns(ledger_path):
    from docket.domain.effects import INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES
    from docket.domain.events import IntentOutcomeUnknown, RunBasePinned, RunBasePinRequested

    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    versions: dict[str, int] = {}

    def event(cls, run, **payload):
        versions[run] = versions.get(run, 0) + 1
        return cls(stream=f"run:{run}", version=versions[run], recorded_at=at(sum(versions.values())), **payload)

    def intent(run):
        return event(RunBasePinRequested, run, intent_id=f"i-{run}", run_id=run, target_branch="main",
                     repository="/repo/.git")

    def unknown(run, reason):
        return event(IntentOutcomeUnknown, run, intent_id=f"i-{run}", reason=reason)

    def outcome(run):
        return event(RunBasePinned, run, intent_id=f"i-{run}", run_id=run, commit="a" * 40, result="observed")

    ledger.append([intent("a"), intent("b"), unknown("b", "busy"), intent("c"), outcome("a"), unknown("c", "x"),
                   outcome("c"), intent("d"), unknown("b", "still busy"), *mixed(20)])
    with ledger.recorder.datastore.transaction(commit=False) as c:
        found = ledger.recorder.select_intent_events(c, 0, INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES)
        after_b = ledger.recorder.select_intent_events(c, 3, INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES)
    ledger.close()
    assert [(n.originator_id, n.topic) for n in found] == [
        ("run:b", "RunBasePinRequested.v1"), ("run:b", "IntentOutcomeUnknown.v1"),
        ("run:d", "RunBasePinRequested.v1"), ("run:b", "IntentOutcomeUnknown.v1")]
    assert [n.id for n in found] == sorted(n.id for n in found)
    assert [n.originator_id for n in after_b] == ["run:b", "run:d", "run:b"]  # b's unknowns after the cursor
