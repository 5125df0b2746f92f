"""The chained store on real SQLite files: genesis, gapless positions, modes, concurrency."""

from __future__ import annotations

import multiprocessing
import sqlite3
import stat
from pathlib import Path

import pytest
from eventsourcing.persistence import IntegrityError

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.world.ledger.ledger_rows import read_chain_rows
from docket.adapters.world.ledger.store import ChainBroken
from docket.domain.kernel.chain import GENESIS_DIGEST, verify_chain
from docket.domain.events import LedgerCreatedV2, TaskPlanned

T0 = "2026-01-01T00:00:00.000Z"


def task_event(i: int, version: int = 1) -> TaskPlanned:
    return TaskPlanned(stream=f"task:t{i}", version=version, recorded_at=T0, task_id=f"t{i}", run_id="r", title="x")


def chain_of(path: Path):
    with sqlite3.connect(path) as conn:
        return verify_chain(read_chain_rows(conn))


def test_genesis_event_at_position_one_and_init_is_idempotent(ledger_path):
    ledger = Ledger(ledger_path)
    assert ledger.initialise(T0) is True
    assert ledger.initialise(T0) is False
    ((position, event),) = ledger.history("ledger")
    assert position == 1 and isinstance(event, LedgerCreatedV2) and event.genesis_digest == GENESIS_DIGEST
    assert event.repository_id is None  # made outside a repository: bound to none
    ledger.close()


def test_files_are_private(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    ledger.close()
    for path in ledger_path.parent.glob("ledger.sqlite*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_positions_are_gapless_and_digests_are_written_with_their_events(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    assert ledger.append([task_event(1), task_event(2)]) == [2, 3]
    with pytest.raises(IntegrityError):
        ledger.append([task_event(3), task_event(1)])  # second collides: whole batch rolls back
    assert ledger.append([task_event(3)]) == [4]
    ledger.close()
    head, broken = chain_of(ledger_path)
    assert broken is None and head.position == 4
    with sqlite3.connect(ledger_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM chain").fetchone()[0] == 4


def test_history_gives_each_event_its_ledger_position(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    ledger.append([task_event(2)])
    assert [(p, e.task_id) for p, e in ledger.history("task:t2")] == [(3, "t2")]
    ledger.close()


def test_appending_to_a_damaged_ledger_is_refused(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("DELETE FROM chain WHERE position = 2")
    with pytest.raises(ChainBroken):
        ledger.append([task_event(2)])
    ledger.close()


def _append_many(path: str, worker: int, count: int) -> None:
    ledger = Ledger(Path(path))
    for i in range(count):
        ledger.append([task_event(worker * 100_000 + i)])
    ledger.close()


@pytest.mark.slow
def test_four_processes_appending_at_once_lose_nothing_and_keep_one_chain(ledger_path):
    Ledger(ledger_path).initialise(T0)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(ledger_path), w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    head, broken = chain_of(ledger_path)
    assert broken is None and head.position == 1 + 4 * 150
    with sqlite3.connect(ledger_path) as conn:
        streams = {r[0] for r in conn.execute("SELECT originator_id FROM stored_events")}
        positions = [r[0] for r in conn.execute("SELECT rowid FROM stored_events ORDER BY rowid")]
    assert len(streams) == 1 + 600
    assert positions == list(range(1, 602))


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=6), min_size=1, max_size=8))
def test_any_sequence_of_batches_keeps_one_gapless_verifiable_chain(tmp_path_factory, batches):
    """Batches that collide on a stream version are refused whole; the rest land in order."""
    path = tmp_path_factory.mktemp("prop") / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.initialise(T0)
    versions: dict[int, int] = {}
    expected = 1
    for batch in batches:
        events, local = [], dict(versions)
        for stream in batch:
            local[stream] = local.get(stream, 0) + 1
            events.append(TaskPlanned(stream=f"task:s{stream}", version=local[stream], recorded_at=T0,
                                      task_id=f"s{stream}", run_id="r", title="x"))
        if len(batch) % 3 == 0:
            events.append(events[0])  # the same stream version twice: the batch must be refused whole
            with pytest.raises(IntegrityError):
                ledger.append(events)
            continue
        assert ledger.append(events) == list(range(expected + 1, expected + 1 + len(events)))
        expected += len(events)
        versions = local
    ledger.close()
    head, broken = chain_of(path)
    assert broken is None and head.position == expected


def test_recorded_time_never_runs_backwards_across_or_within_appends(ledger_path):
    """A clock that jumps back (or a batch out of order) is clamped inside the append transaction."""
    ledger = Ledger(ledger_path)
    ledger.initialise("2030-01-01T00:00:00.000Z")

    def task(i: int, at: str) -> TaskPlanned:
        return TaskPlanned(stream=f"task:t{i}", version=1, recorded_at=at, task_id=f"t{i}", run_id="r", title="t")

    ledger.append([task(1, "2031-01-01T00:00:00.000Z"), task(2, "1999-01-01T00:00:00.000Z")])
    seen = []
    ledger.decide(lambda now: seen.append(now) or task(3, now), "2000-01-01T00:00:00.000Z")
    times = [e.recorded_at for _, e in ledger.history("task:t1") + ledger.history("task:t2") + ledger.history("task:t3")]
    assert times == ["2031-01-01T00:00:00.000Z"] * 3
    assert seen == ["2031-01-01T00:00:00.000Z"]  # the decision itself is given the clamped time
    ledger.close()
