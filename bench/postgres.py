"""postgres: docket's ledger in PostgreSQL against the library's bare PostgreSQL recorder (issue 23).

A throwaway cluster of its own (tests/postgres_cluster.py: fsync and synchronous commit on, on this machine's
disk), started here and stopped at the end; each side in a fresh database of it. No cluster can be started here:
one row says why.

- append, one event per transaction, and 100 per transaction (goal <= 1.3x): docket's ``Ledger.append`` of
  task-planned events, as docket appends (its mapper, the time floor, the chained recorder: the library's
  PostgresProcessRecorder plus docket's chain rows in the same transaction under the library's append lock)
  against the library's own ``PostgresApplicationRecorder.insert_events`` of the same stored bytes (made before the
  clock starts), with the connection settings docket uses. For information, docket's chained recorder alone
  (``insert_events`` of the same bytes), each side's client CPU, and the same on databases with synchronous_commit
  off (no wait for the flush: round trips and CPU). Many short interleaved rounds (the order reversed every other
  round), medians per transaction.
- appends from 4 processes at once, each its own ``Ledger`` on one database, one event per transaction: events/s
  over the burst and the p50/p99 of one append's latency, one process alone beside it (information). The issue's
  "2 hosts" are two pairs of processes on this one machine until there are hosts to run them on.
- ``docket verify`` (the whole process, DOCKET_DATABASE_URL) on a large ledger (1,000,000 events; 50,000 with
  --quick) against a plain read of the same rows: a Python process reading the verify query's rows through a
  psycopg server-side cursor as docket's reader does, doing nothing with them; and, for information, psql's
  ``COPY (the same query) TO STDOUT`` into /dev/null. The ledger is filled fast: docket's genesis, then the
  realistic event mix of bench/common.py mapped as docket stores it, chained with docket's own chain functions
  (domain/kernel/chain.py) and loaded with COPY, then checked to verify (information: no goal is set).

    python -m bench postgres [--quick]
"""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from docket.domain import events as ev
from docket.domain.kernel import streams

from .common import BIN, Row, log, make, median, mixed_events, spread, stamp

GOAL = 1.3
BATCH = 100  # events per transaction in the batched scenario
PROCESSES = 4  # "4 processes on 2 hosts": two pairs of processes on this machine
LOCK_TIMEOUT = 30  # seconds; four writers queue for the append lock
VERIFY_SQL = ("SELECT e.notification_id, e.originator_id, e.originator_version, e.topic, e.state, c.digest "
              "FROM stored_events e LEFT JOIN chain c ON c.position = e.notification_id ORDER BY e.notification_id")
PLAIN_READ = f"""
import sys, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    conn.read_only = True
    with conn.transaction(), conn.cursor(name="plain_read") as cursor:
        cursor.itersize = 2000
        cursor.execute({VERIFY_SQL!r})
        for row in cursor:
            pass
"""


# Databases ------------------------------------------------------------------------

@contextmanager
def cluster() -> Iterator[str]:
    """A throwaway cluster's server URL for the block (tests/postgres_cluster.py), stopped and removed after it."""
    from tests import postgres_cluster

    folder = tempfile.mkdtemp(prefix="docket-pg-")  # a short path: the server's unix socket lives there
    try:
        yield postgres_cluster.start(folder)
    finally:
        postgres_cluster.stop(folder)


@contextmanager
def fresh_database(server_url: str, prefix: str = "docket_bench", settings: dict[str, str] | None = None
                   ) -> Iterator[str]:
    """A new, empty database on the server for the block (dropped afterwards), as its URL; settings are given to
    every session opened on it (ALTER DATABASE ... SET)."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
                      .format(sql.Identifier(name)))
        for setting, value in (settings or {}).items():
            admin.execute(sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                sql.Identifier(name), sql.Identifier(setting), sql.Literal(value)))
    try:
        yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def databases(server_url: str, count: int, settings: dict[str, str] | None = None) -> Iterator[list[str]]:
    """`count` fresh databases on the server for the block, as URLs."""
    with ExitStack() as stack:
        yield [stack.enter_context(fresh_database(server_url, settings=settings)) for _ in range(count)]


def docket_ledger(url: str) -> Any:
    """docket's ledger in the database at url, holding its genesis event (position 1)."""
    from docket.adapters.service_layer.kernel.ledger import Ledger

    ledger = Ledger(Path(tempfile.gettempdir()), url=url, lock_timeout=LOCK_TIMEOUT)
    ledger.initialise(stamp(0))
    return ledger


def bare_recorder(url: str) -> Any:
    """The library's own PostgresApplicationRecorder in the database at url, with the settings docket's ledger
    uses there (its pool, pre-ping, text stream ids, lock timeout), holding one event like docket's genesis."""
    from eventsourcing.postgres import PostgresFactory
    from eventsourcing.utils import Environment

    from docket.adapters.world.ledger.database_url import postgres_env

    recorder = PostgresFactory(Environment("", postgres_env(url, lock_timeout=LOCK_TIMEOUT))).application_recorder()
    recorder.insert_events(stored([task_events(-1, 1)])[0])
    return recorder


def count_events(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0]


def verified_head(url: str) -> int:
    """The position the ledger at url verifies to, through docket's reader port (AssertionError if it breaks)."""
    from docket.adapters.world.ledger.postgres_reader import postgres_reader

    with postgres_reader(url) as reader:
        head, broken = reader.verify_chain()
    assert broken is None, broken
    return head.position


# Events -----------------------------------------------------------------------------

def task_events(first: int, count: int) -> list[ev.Event]:
    """count task-planned events, as docket plans a task (TaskPlanned v2, a stream per task)."""
    out = []
    for i in range(first, first + count):
        task_id = f"task-{i + 1:08d}"
        prompt = f"Do task {i + 1} of the benchmark run."
        out.append(make(ev.TaskPlannedV2, streams.task_stream(task_id), 1, stamp(max(i, 0) + 1), task_id=task_id,
                        run_id="run-bench", title=f"task {i + 1} of the benchmark",
                        prompt_sha256=hashlib.sha256(prompt.encode()).hexdigest(),
                        prompt_chars=len(prompt)))
    return out


def stored(batches: list[list[ev.Event]]) -> list[list[Any]]:
    """The same batches as docket's mapper stores them (the exact stored bytes)."""
    from docket.adapters.world.ledger.store import CanonicalMapper

    mapper = CanonicalMapper()
    return [[mapper.to_stored_event(e) for e in batch] for batch in batches]


# 1 and 2: append, docket against the bare recorder -----------------------------------

@dataclass
class AppendSides:
    """Per round, each side's wall time for the round's transactions; what each database holds at the end."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in APPEND_SIDES})
    cpu_s: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in APPEND_SIDES})  # client's
    events: dict[str, int] = field(default_factory=dict)
    heads: dict[str, int] = field(default_factory=dict)  # the positions docket's chains verify to


# docket: Ledger.append of the events (mapping, the time floor, the chained recorder), as docket appends;
# recorder: docket's chained recorder alone, insert_events of the stored bytes (information: what the chain costs);
# bare: the library's PostgresApplicationRecorder.insert_events of the same stored bytes.
APPEND_SIDES = ("docket", "recorder", "bare")


def measure_append(urls: dict[str, str], *, per_transaction: int, transactions: int, rounds: int) -> AppendSides:
    """Each round, each side appends `transactions` transactions of `per_transaction` events into its own database
    (urls: a URL per side of APPEND_SIDES), taking turns (the order reversed every other round); the events and
    their stored bytes are made before the clock starts."""
    sides = AppendSides()
    n = per_transaction * transactions
    ledger, chained, bare = docket_ledger(urls["docket"]), docket_ledger(urls["recorder"]), bare_recorder(urls["bare"])
    try:
        warm_up = task_events(0, per_transaction)  # statements prepared, connections made, before any timing
        ledger.append(warm_up)
        for side in (chained.recorder, bare):
            side.insert_events(stored([warm_up])[0])
        for i in range(rounds):
            events = task_events(per_transaction + i * n, n)
            batches = [events[k:k + per_transaction] for k in range(0, n, per_transaction)]
            stored_batches = stored(batches)
            runs: dict[str, Callable[[], Any]] = {
                "docket": lambda: [ledger.append(b) for b in batches],
                "recorder": lambda: [chained.recorder.insert_events(b) for b in stored_batches],
                "bare": lambda: [bare.insert_events(b) for b in stored_batches],
            }
            for side in (APPEND_SIDES if i % 2 == 0 else APPEND_SIDES[::-1]):
                gc.collect()
                t0, c0 = time.perf_counter(), time.process_time()
                runs[side]()
                sides.seconds[side].append(time.perf_counter() - t0)
                sides.cpu_s[side].append(time.process_time() - c0)
    finally:
        ledger.close()
        chained.close()
        bare.datastore.close()
    sides.events = {side: count_events(url) for side, url in urls.items()}
    sides.heads = {side: verified_head(urls[side]) for side in ("docket", "recorder")}
    return sides


def append_rows(sides: AppendSides, per_transaction: int, transactions: int, flushed: bool = True) -> list[Row]:
    d, r, b = (median(sides.seconds[side]) / transactions for side in APPEND_SIDES)
    d_cpu, r_cpu, b_cpu = (median(sides.cpu_s[side]) / transactions * 1000 for side in APPEND_SIDES)
    cpu = f"client CPU docket/recorder/bare {d_cpu:.2f}/{r_cpu:.2f}/{b_cpu:.2f} ms"
    rounds = len(sides.seconds["docket"])
    log(f"postgres append {transactions} x {per_transaction}{'' if flushed else ' without the flush'}: docket "
        f"{d * 1000:.3f} ms, its recorder alone {r * 1000:.3f} ms, bare {b * 1000:.3f} ms per transaction; {cpu}")
    what = (f"{rounds} rounds of {transactions:,} transactions x {per_transaction} "
            f"event{'s' if per_transaction > 1 else ''}")
    if not flushed:  # information only: with no wait for the WAL's flush, what is left is round trips and CPU
        return [Row("postgres", f"  same, synchronous_commit off: docket vs bare (bare {b * 1000:.3f} ms; recorder "
                                f"alone {r / b:.2f}x; {cpu})", d * 1000, "ms", ratio=d / b, goal="(info: no flush)")]
    return [
        Row("postgres", f"bare PostgresApplicationRecorder.insert_events, {what}, median", b * 1000, "ms"),
        Row("postgres", f"docket Ledger.append (chained recorder), {what}, median", d * 1000, "ms",
            ratio=d / b, goal=f"<= {GOAL}x bare", passed=d / b <= GOAL),
        Row("postgres", f"  = docket events/s in {per_transaction}-event transactions (bare "
                        f"{per_transaction / b:,.0f})", per_transaction / d, "events/s"),
        Row("postgres", f"  (information) docket's chained recorder alone, insert_events of the same bytes ({cpu})",
            r * 1000, "ms", ratio=r / b, goal="(info)"),
    ]


# 3: appends from several processes at once ---------------------------------------------

WORKER = """
import json, sys, time
from pathlib import Path
from bench.postgres import task_events, LOCK_TIMEOUT
from docket.adapters.service_layer.kernel.ledger import Ledger

url, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
first = 1_000_000 * (worker + 1)
events = task_events(first, count)
ledger = Ledger(Path("."), url=url, lock_timeout=LOCK_TIMEOUT)
ledger.append(task_events(first - 1, 1))  # a first transaction before the burst: connected, the pool warm
print("ready", flush=True)
sys.stdin.readline()  # the burst starts when every process is ready
latencies = []
for event in events:
    began = time.perf_counter()
    ledger.append([event])
    latencies.append(time.perf_counter() - began)
ended = time.time()
ledger.close()
print(json.dumps({"latencies": latencies, "ended": ended}), flush=True)
"""


@dataclass
class Burst:
    processes: int
    events: int  # appended in the burst, by all processes
    wall_s: float  # from the common start to the last process's last commit
    latencies_s: list[float]  # of every append, every process
    head: int  # the position the chain verifies to afterwards

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def measure_burst(url: str, *, processes: int, appends: int) -> Burst:
    """`processes` separate Python processes, each its own Ledger on the database at url, append `appends`
    single-event transactions each, starting together once every one has connected and appended once."""
    import json

    docket_ledger(url).close()  # the ledger exists before they start
    before = count_events(url)
    root = Path(__file__).resolve().parent.parent
    children = [subprocess.Popen([sys.executable, "-c", WORKER, url, str(k), str(appends)], cwd=root,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for k in range(processes)]
    try:
        for child in children:
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("an appending process failed before the burst (its error is above)")
        started = time.time()
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [json.loads(child.stdout.readline()) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.stdin.close()
            if child.wait(timeout=60) != 0:
                raise RuntimeError(f"an appending process exited with {child.returncode}")
    wall = max(r["ended"] for r in results) - started
    events = count_events(url) - before - processes  # each process's first append is not in the burst
    return Burst(processes, events, wall, [x for r in results for x in r["latencies"]], verified_head(url))


def burst_rows(burst: Burst, alone: Burst) -> list[Row]:
    log(f"postgres burst: {burst.processes} processes {burst.events / burst.wall_s:,.0f} events/s, p99 "
        f"{burst.percentile(99) * 1000:.2f} ms; one process {alone.events / alone.wall_s:,.0f} events/s")
    hosts = f"{burst.processes} processes (2 pairs on this machine for the issue's 2 hosts)"
    return [
        Row("postgres", f"appends from {hosts}, {burst.events:,} single-event transactions: events/s "
                        f"(one process alone: {alone.events / alone.wall_s:,.0f})", burst.events / burst.wall_s,
            "events/s", goal="(info)"),
        Row("postgres", f"  p99 latency of one append among {burst.processes} processes (p50 "
                        f"{burst.percentile(50) * 1000:.2f} ms; one process alone: p99 "
                        f"{alone.percentile(99) * 1000:.2f} ms)", burst.percentile(99) * 1000, "ms", goal="(info)"),
    ]


# 4: docket verify on a large ledger against a plain read --------------------------------

def fill_ledger(url: str, size: int, chunk: int = 50_000) -> int:
    """A ledger of `size` events at url, fast: docket's genesis appended as docket does, then size - 1 events of
    bench/common.py's mix, stored as docket's mapper stores them, chained with domain/kernel/chain.py's functions and
    loaded with COPY, with the Merkle hashes of completed blocks the recorder keeps; returns the chain's head."""
    from docket.adapters.world.ledger.store import CanonicalMapper
    from docket.domain.kernel.chain import chain_entry, next_digest

    ledger = docket_ledger(url)
    recorder, mapper = ledger.recorder, CanonicalMapper()
    try:
        with recorder.write_transaction() as c:
            head = recorder._chain_head(c)
            assert head.position == 1, head
            position, digest = head.position, head.digest
            events = mixed_events(size - 1, first_position=2)
            while True:
                event_rows, chain_rows = [], []
                for event in events:
                    s = mapper.to_stored_event(event)
                    position += 1
                    digest = next_digest(digest, chain_entry(position, s.originator_id, s.originator_version,
                                                             s.topic, s.state))
                    event_rows.append((position, s.originator_id, s.originator_version, s.topic, s.state))
                    chain_rows.append((position, digest))
                    if len(event_rows) == chunk:
                        break
                if not event_rows:
                    break
                with c.copy("COPY stored_events (notification_id, originator_id, originator_version, topic, state) "
                            "FROM STDIN") as copy:
                    for row in event_rows:
                        copy.write_row(row)
                with c.copy("COPY chain (position, digest) FROM STDIN") as copy:
                    for row in chain_rows:
                        copy.write_row(row)
                recorder._keep_completed_blocks(c, event_rows[0][0] - 1, chain_rows)
    finally:
        ledger.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # what autovacuum would do to a ledger in time
        conn.execute("VACUUM (FREEZE, ANALYZE)")
    return position


@dataclass
class VerifySides:
    size: int
    verify_s: list[float] = field(default_factory=list)
    plain_s: list[float] = field(default_factory=list)
    copy_s: list[float] = field(default_factory=list)  # psql COPY, when psql is found
    verified: int = 0  # the events docket verify reported


def psql() -> str | None:
    from tests import postgres_cluster

    folder = postgres_cluster._bindir()
    candidates = [folder / "psql"] if folder is not None else []
    found = shutil.which("psql")
    candidates += [Path(found)] if found else []
    return next((str(p) for p in candidates if os.access(p, os.X_OK)), None)


def run_quiet(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    return time.perf_counter() - t0


def measure_verify(url: str, size: int, rounds: int) -> VerifySides:
    """`docket verify` whole process against the plain read (and psql's COPY), interleaved, after one warm-up
    each; the ledger at url must already hold `size` events (fill_ledger)."""
    import json

    sides = VerifySides(size)
    folder = tempfile.mkdtemp(prefix="docket-bench-verify-")  # not a repository: nothing but the database
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    env["DOCKET_DATABASE_URL"] = url
    verify_argv = [str(BIN / "docket"), "verify"]
    plain_argv = [sys.executable, "-c", PLAIN_READ, url]
    psql_bin = psql()
    copy_argv = [psql_bin, "-X", "-q", "-d", url, "-c", f"COPY ({VERIFY_SQL}) TO STDOUT"] if psql_bin else None
    try:
        said = subprocess.run([*verify_argv, "--json"], check=True, capture_output=True, text=True, env=env,
                              cwd=folder)
        sides.verified = json.loads(said.stdout)["events"]
        runs: dict[str, Callable[[], float]] = {
            "verify": lambda: run_quiet(verify_argv, env, folder),
            "plain": lambda: run_quiet(plain_argv),
        }
        if copy_argv:
            runs["copy"] = lambda: run_quiet(copy_argv)
        for name, warm_up in runs.items():
            if name != "verify":
                warm_up()
        for i in range(rounds):
            for name in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
                {"verify": sides.verify_s, "plain": sides.plain_s, "copy": sides.copy_s}[name].append(runs[name]())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sides


def verify_rows(sides: VerifySides) -> list[Row]:
    v, p = median(sides.verify_s), median(sides.plain_s)
    rounds, size = len(sides.verify_s), sides.size
    log(f"postgres verify {size:,}: docket verify {v:.2f} s ({spread(sides.verify_s)}), plain read {p:.2f} s "
        f"({spread(sides.plain_s)})" + (f", psql COPY {median(sides.copy_s):.2f} s" if sides.copy_s else ""))
    rows = [
        Row("postgres", f"plain read of the same rows (psycopg server-side cursor, whole process), {size:,} events, "
                        f"median of {rounds} ({spread(sides.plain_s)})", p, "s"),
        Row("postgres", f"'docket verify', whole process, DOCKET_DATABASE_URL, {size:,} events, median of {rounds} "
                        f"({spread(sides.verify_s)})", v, "s", ratio=p / v, goal="(info: plain / verify)"),
        Row("postgres", f"  = events/s of 'docket verify' (plain read: {size / p:,.0f} ev/s)", size / v, "events/s"),
    ]
    if sides.copy_s:
        c = median(sides.copy_s)
        rows.append(Row("postgres", f"(information) psql COPY (the same query) TO STDOUT > /dev/null "
                                    f"({spread(sides.copy_s)})", c, "s", ratio=c / v, goal="(info: copy / verify)"))
    return rows


# The benchmark ---------------------------------------------------------------------------

def run(quick: bool) -> list[Row]:
    # (events per transaction, transactions per round, rounds): many short rounds, so that a slow moment of the
    # shared disk falls on every side alike
    appends = ((1, 30, 10), (BATCH, 5, 10)) if quick else ((1, 100, 20), (BATCH, 10, 20))
    burst_appends = 100 if quick else 500
    size, verify_rounds = (50_000, 3) if quick else (1_000_000, 5)
    from importlib.util import find_spec

    from tests import postgres_cluster

    why = postgres_cluster.available() or (None if find_spec("psycopg") else "psycopg is not installed (the "
                                                                              "postgres extra)")
    if why:
        return [Row("postgres", f"not run: {why}", None, "")]
    rows: list[Row] = []
    with cluster() as server:
        for per_transaction, transactions, rounds in appends:
            for flushed in (True, False):
                settings = None if flushed else {"synchronous_commit": "off"}
                with databases(server, len(APPEND_SIDES), settings) as urls:
                    sides = measure_append(dict(zip(APPEND_SIDES, urls)), per_transaction=per_transaction,
                                           transactions=transactions, rounds=rounds)
                rows += append_rows(sides, per_transaction, transactions, flushed)
        with fresh_database(server) as url:
            alone = measure_burst(url, processes=1, appends=burst_appends)
        with fresh_database(server) as url:
            burst = measure_burst(url, processes=PROCESSES, appends=burst_appends)
        rows += burst_rows(burst, alone)
        with fresh_database(server) as url:
            t0 = time.perf_counter()
            head = fill_ledger(url, size)
            log(f"postgres: filled a {head:,}-event ledger in {time.perf_counter() - t0:.1f} s")
            rows += verify_rows(measure_verify(url, size, verify_rounds))
    return rows


if __name__ == "__main__":
    from .common import table

    print(table(run("--quick" in sys.argv)))
