"""The ledger's promises on both stores: the SQLite file and a PostgreSQL database (a real cluster, see conftest).

The same chain for the same events on either store; gapless positions that a failed append does not skip; appends
and decisions from several processes at once, none lost, none forked; a row changed by UPDATE and a cut tail found
(the tail with an anchor); an append killed before its commit leaves nothing; an object docket did not make in the
ledger's schema (a trigger rewriting inserts) named by the schema check.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.domain.kernel.chain import ChainHead, verify_chain
from docket.domain.kernel.errors import VerificationFailed
from docket.domain.events import TaskPlanned

T0 = "2026-01-01T00:00:00.000Z"


def task_event(i: int, version: int = 1, stream: str | None = None) -> TaskPlanned:
    return TaskPlanned(stream=stream or f"task:t{i}", version=version, recorded_at=T0, task_id=f"t{i}", run_id="r",
                       title=f"task {i}")


@dataclass
class Store:
    """One ledger on one store: open it, read it through the reader port, and change its rows behind docket's back
    (as someone with the database's password could)."""

    kind: str
    path: Path
    url: str | None

    def open(self, **kwargs: Any) -> Ledger:
        return Ledger(self.path, url=self.url, **kwargs)

    @contextmanager
    def reader(self) -> Iterator[Any]:
        if self.url is None:
            from docket.adapters.world.ledger.reader import ledger_reader

            with ledger_reader(self.path) as reader:
                yield reader
        else:
            from docket.adapters.world.ledger.postgres_reader import postgres_reader

            with postgres_reader(self.url) as reader:
                yield reader

    @property
    def position(self) -> str:
        return "rowid" if self.url is None else "notification_id"

    def tamper(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        sql = sql.replace("{position}", self.position)
        if self.url is None:
            with sqlite3.connect(self.path) as conn:
                conn.execute(sql.replace("%s", "?"), params)
        else:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(sql, params)

    def verified(self, anchor: ChainHead | None = None) -> tuple[ChainHead, Any]:
        with self.reader() as reader:
            return reader.verify_chain(anchor=anchor)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    return Store(request.param, tmp_path / "ledger.sqlite", url)


def test_the_same_events_give_the_same_chain_on_either_store(tmp_path, postgres_url):
    heads = []
    for store in (Store("sqlite", tmp_path / "ledger.sqlite", None), Store("postgres", tmp_path / "x", postgres_url)):
        ledger = store.open()
        ledger.append([task_event(i) for i in range(1, 6)])
        ledger.append([task_event(1, version=2)])
        ledger.close()
        head, broken = store.verified()
        assert broken is None
        with store.reader() as reader:
            rows = [row[:5] for row in reader.chain_rows()]
        heads.append((head, rows))
    assert heads[0] == heads[1]  # every position, stream, version, type, stored byte and the head digest
    assert heads[0][0].position == 6


def test_positions_are_gapless_even_after_a_failed_append(store):
    ledger = store.open()
    assert ledger.append([task_event(1), task_event(2)]) == [1, 2]
    with pytest.raises(IntegrityError):
        ledger.append([task_event(3), task_event(1)])  # the second collides: the whole batch rolls back
    assert ledger.append([task_event(3)]) == [3]  # PostgreSQL's sequence moved on; docket's positions did not
    ledger.close()
    head, broken = store.verified()
    assert broken is None and head.position == 3


def test_a_genesis_and_a_reopen_find_the_same_ledger(store):
    ledger = store.open()
    assert ledger.initialise(T0) is True
    ledger.close()
    again = store.open()
    assert again.initialise(T0) is False and again.is_initialised()
    assert [p for p, _ in again.history("ledger")] == [1]
    again.close()


def _at_once(target: Any, argument_lists: list[tuple[Any, ...]]) -> list[int | None]:
    """Each argument list given to target in a process of its own, all started together; their exit codes."""
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=target, args=args) for args in argument_lists]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    return [p.exitcode for p in workers]


def _append_many(kind: str, path: str, url: str | None, worker: int, count: int) -> None:
    ledger = Ledger(Path(path), url=url)
    for i in range(count):
        ledger.append([task_event(worker * 1000 + i)])
    ledger.close()


def test_appends_from_four_processes_at_once_lose_nothing_and_never_fork(store):
    store.open().close()  # the tables, made once
    assert _at_once(_append_many, [(store.kind, str(store.path), store.url, w, 25) for w in range(4)]) == [0] * 4
    head, broken = store.verified()
    assert broken is None and head.position == 100
    with store.reader() as reader:
        assert sorted(row[1] for row in reader.events()) == sorted(
            f"task:t{w * 1000 + i}" for w in range(4) for i in range(25))


def _count_up(path: str, url: str | None, times: int) -> None:
    """Read the counter stream's version, append the next: a decision that loses an update if not serialised."""
    ledger = Ledger(Path(path), url=url)
    for _ in range(times):
        def decision(now: str) -> TaskPlanned:
            version = len(ledger.history("task:counter"))
            return task_event(version + 1, version=version + 1, stream="task:counter")
        ledger.decide(decision, T0)
    ledger.close()


def test_decisions_from_several_processes_are_serialised(store):
    store.open().close()
    # not one decision met a version another had taken
    assert _at_once(_count_up, [(str(store.path), store.url, 15)] * 3) == [0] * 3
    ledger = store.open()
    assert [e.version for _, e in ledger.history("task:counter")] == list(range(1, 46))
    ledger.close()


def test_a_row_changed_by_update_breaks_the_chain_there(store):
    ledger = store.open()
    ledger.append([task_event(i) for i in range(1, 5)])
    ledger.close()
    store.tamper("UPDATE stored_events SET state = %s WHERE {position} = 3",
                 (b'{"payload":{"run_id":"r","task_id":"t3","title":"forged"},"recorded_at":"2026-01-01T00:00:00.000Z"}',))
    head, broken = store.verified()
    assert broken is not None and broken.position == 3
    assert head.position == 2


def test_a_deleted_tail_is_caught_with_an_anchor(store):
    ledger = store.open()
    ledger.append([task_event(i) for i in range(1, 6)])
    ledger.close()
    anchor, _ = store.verified()
    store.tamper("DELETE FROM stored_events WHERE {position} > 3")
    store.tamper("DELETE FROM chain WHERE position > 3")
    head, broken = store.verified()
    assert broken is None and head.position == 3  # a cut tail is a shorter, intact chain ...
    _, broken = store.verified(anchor=anchor)
    assert broken is not None  # ... which the anchor taken before the cut refuses
    with store.reader() as reader:
        assert reader.last_event_and_chain_end() == (3, 3)


def test_a_cut_tail_without_its_digests_is_named_by_the_orphan_digest(store):
    ledger = store.open()
    ledger.append([task_event(i) for i in range(1, 5)])
    ledger.close()
    store.tamper("DELETE FROM stored_events WHERE {position} = 4")
    with store.reader() as reader:
        assert reader.orphan_digest_after(reader.head_position()) == 4
    with pytest.raises(Exception, match="chain ends at 4"):
        store.open().append([task_event(9)])  # refused: an append would chain onto a damaged head


def _append_then_killed(path: str, url: str | None) -> None:
    os.environ["DOCKET_FAULT"] = "store:before-commit"
    import importlib

    from docket.adapters.world import faults

    importlib.reload(faults)
    ledger = Ledger(Path(path), url=url)
    ledger.append([task_event(99)])


def test_an_append_killed_before_its_commit_leaves_nothing(store):
    ledger = store.open()
    ledger.append([task_event(1)])
    ledger.close()
    code = ("import sys; from tests.integration.test_ledger_stores import _append_then_killed; "
            "_append_then_killed(sys.argv[1], sys.argv[2] or None)")
    killed = subprocess.run([sys.executable, "-c", code, str(store.path), store.url or ""],
                            cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    head, broken = store.verified()
    assert broken is None and head.position == 1
    again = store.open()
    assert again.append([task_event(2)]) == [2]  # the lock the killed append held was given back
    again.close()


def test_a_trigger_in_the_ledger_is_named_by_the_schema_check(store):
    ledger = store.open()
    ledger.append([task_event(1)])
    ledger.close()
    if store.url is None:
        store.tamper("CREATE TRIGGER rewrite AFTER INSERT ON stored_events BEGIN SELECT 1; END")
    else:
        store.tamper("CREATE FUNCTION rewrite() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$")
        store.tamper("CREATE TRIGGER rewrite BEFORE INSERT ON stored_events FOR EACH ROW EXECUTE FUNCTION rewrite()")
    with store.reader() as reader, pytest.raises(VerificationFailed, match="rewrite"):
        reader.check_schema()


def test_an_untouched_ledger_passes_the_schema_check(store):
    ledger = store.open()
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    ledger.close()
    with store.reader() as reader:
        reader.check_schema()
        assert reader.missing_tables() == []


def _open_and_append(path: str, url: str | None, worker: int) -> None:
    ledger = Ledger(Path(path), url=url)
    ledger.initialise(T0)
    ledger.append([task_event(worker)])
    ledger.close()


def test_four_processes_opening_a_new_ledger_at_once_agree_on_one(store):
    """The first open creates the tables (on PostgreSQL under an advisory lock): racing first opens must neither
    fail nor make two genesis events."""
    assert _at_once(_open_and_append, [(str(store.path), store.url, w) for w in range(4)]) == [0] * 4
    head, broken = store.verified()
    assert broken is None and head.position == 5  # one genesis, four appends
    ledger = store.open()
    assert [p for p, _ in ledger.history("ledger")] == [1]
    ledger.close()


@contextmanager
def _holding_the_write_lock(store: Store) -> Iterator[None]:
    """Another process's transaction that holds the append lock (a writer stuck mid-decision)."""
    if store.url is None:
        conn = sqlite3.connect(store.path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.rollback()
            conn.close()
    else:
        import psycopg

        with psycopg.connect(store.url) as conn, conn.transaction():
            conn.execute("LOCK TABLE stored_events IN EXCLUSIVE MODE")
            yield


def test_a_writer_holding_the_lock_gives_ledger_busy_not_a_hang(store):
    from docket.domain.kernel.errors import Conflict

    ledger = store.open()
    ledger.append([task_event(1)])
    ledger.close()
    waiting = store.open(lock_timeout=1)
    with _holding_the_write_lock(store), pytest.raises(Conflict) as raised:
        waiting.append([task_event(2)])
    assert raised.value.code == "ledger-busy" and "DOCKET_LOCK_TIMEOUT" in raised.value.message
    assert waiting.append([task_event(2)]) == [2]  # the lock given back, the same connection appends
    waiting.close()


def test_a_database_restarted_under_an_open_ledger_loses_nothing_and_is_used_again(tmp_path, monkeypatch, capfd):
    """The server goes away (a restart, a failover): with no wait allowed (DOCKET_DATABASE_WAIT=0) an append while it
    is down fails clearly and records nothing; with a wait, an append made while it is down is made once it is back,
    saying so; either way the same open ledger goes on, on an intact chain, each append recorded once."""
    import threading
    import tempfile

    from tests import postgres_cluster

    why = postgres_cluster.available()
    if why:
        pytest.skip(f"PostgreSQL: {why}")
    folder = tempfile.mkdtemp(prefix="docket-pg-")
    try:
        url = postgres_cluster.start(folder) + "?connect_timeout=2"  # how long a connection is waited for
        ledger = Ledger(tmp_path / "ledger.sqlite", url=url, lock_timeout=5)
        ledger.append([task_event(1)])
        postgres_cluster.stop(folder, keep=True)
        monkeypatch.setenv("DOCKET_DATABASE_WAIT", "0")
        with pytest.raises(Exception) as failed:
            ledger.append([task_event(2)])
        from docket.adapters.world.ledger.storage_errors import storage_failure

        assert storage_failure(failed.value) is not None  # the CLI says `docket: error: database: ...`, exit 2
        postgres_cluster.start(folder)
        assert ledger.append([task_event(2)]) == [2]  # nothing of the failed append was kept

        monkeypatch.setenv("DOCKET_DATABASE_WAIT", "120")
        postgres_cluster.stop(folder, keep=True)
        back = threading.Timer(4, postgres_cluster.start, (folder,))
        back.start()
        try:
            assert ledger.append([task_event(3)]) == [3]  # waited for, then made once
        finally:
            back.join()
        said = capfd.readouterr().err
        assert "cannot be reached; waiting up to 120 s" in said and "is back" in said
        ledger.close()
        store = Store("postgres", tmp_path / "x", url)
        head, broken = store.verified()
        assert broken is None and head.position == 3
    finally:
        postgres_cluster.stop(folder)


def test_a_ledger_in_a_schema_of_its_own_beside_other_tables(postgres_url, tmp_path):
    """`?schema=docket`: the ledger's tables in that schema (made if missing); what else the database holds in
    public is not the ledger's, and the schema check looks at the ledger's schema only."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("CREATE TABLE public.unrelated (x int)")
    store = Store("postgres", tmp_path / "x", postgres_url + "?schema=docket")
    ledger = store.open()
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    ledger.close()
    head, broken = store.verified()
    assert broken is None and head.position == 2
    with store.reader() as reader:
        reader.check_schema()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM docket.stored_events").fetchone()[0] == 2


def test_a_clock_is_compared_with_the_database_servers_and_a_file_ledger_has_none(store):
    """On a shared ledger every host's leases are judged by the times it records: the server's clock is the one all
    hosts can be held to (docket go and supervise warn clock-skew past 2 s)."""
    from docket.adapters.world.clock import SkewedClock, SystemClock

    ledger = store.open()
    try:
        if store.url is None:
            assert ledger.clock_skew_ms(SystemClock()) is None
            return
        assert abs(ledger.clock_skew_ms(SystemClock())) < 2_000  # the server is on this machine
        ahead = ledger.clock_skew_ms(SkewedClock(600_000))
        behind = ledger.clock_skew_ms(SkewedClock(-90_000))
        assert 598_000 < ahead < 602_000 and -92_000 < behind < -88_000
    finally:
        ledger.close()


@pytest.mark.parametrize("given, skewed", [("600000", 600_000), ("-5", -5), ("", None), ("soon", None),
                                           ("9" * 40, None)])
def test_a_lying_clock_is_made_only_for_the_tests_and_only_from_a_number(monkeypatch, given, skewed):
    from docket.adapters.world.clock import SkewedClock, clock_from_env

    monkeypatch.delenv("DOCKET_NOW", raising=False)
    monkeypatch.setenv("DOCKET_CLOCK_SKEW_MS", given)
    monkeypatch.setenv("DOCKET_TESTING", "1")
    clock, _ = clock_from_env()
    assert (clock.skew_ms if isinstance(clock, SkewedClock) else None) == skewed
    monkeypatch.delenv("DOCKET_TESTING")
    assert not isinstance(clock_from_env()[0], SkewedClock)  # a user's shell cannot make docket's clock lie
