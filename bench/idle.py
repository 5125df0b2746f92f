"""8. idle costs on a large ledger: the effector's idle pass, log's memory, log --run, status --at.

The ledger is a copy of the cached mixed ledger of 1,000,000 events (200 runs,
every intent resolved). Each figure is taken side by side, interleaved, with
what it is judged against:

- idle effector pass: the first run's RunBasePinned (position 4) is deleted from
  the copy, so its intent at position 3 stays pending and holds the effector's
  cursor at 2: every pass searches from there. ``Effector.run_pending(only=())``
  finds what is pending and moves the cursor, driving nothing (as a pass does
  while that intent backs off). Taken on the copy (with the topic index) and on
  a second copy whose topic index is dropped (the old scan of every event's
  topic). Goal: < 5 ms.
- append cost of the topic index: 2,000 single-event ``Ledger.append`` saves into
  a fresh ledger with and without the index (information: the append benchmark
  judges the whole cost against the bare library).
- ``docket log`` and ``docket log --json`` over the whole ledger, output to
  /dev/null: peak RSS of the process (from wait4). Goal: < 100 MB.
- ``docket log --run`` of one run (5,000 events) with the views at the head, as a
  whole process, against ``python -c pass``. Goal: < 0.5 s.
- ``docket status --at`` at positions spread over the ledger and at a time, as a
  whole process, against ``docket status`` (current views). Checkpoints are made
  when the first command builds the views from position 1. Goal: < 1 s each.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .common import BIN, Row, cached_ledger, log, median, new_ledger, remove, stamp, temp_dir, timed

EFFECTOR_GOAL = 0.005
RSS_GOAL_MB = 100
LOG_RUN_GOAL = 0.5
STATUS_AT_GOAL = 1.0


# A child's peak RSS counts its parent's pages at the fork (Linux keeps the larger of the two at exec), so
# the command is started by this small process, whose own footprint is a few MB, not by the benchmark.
_MEASURE = """
import os, sys
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\\n")
"""


def _process(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one whole process, which must succeed; output discarded."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURE, *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True)
    elapsed = time.perf_counter() - t0
    *stderr, last = done.stderr.strip().splitlines() or [""]
    code, rss_kb = last.split()
    if code != "0":
        raise RuntimeError(f"{argv} exited {code}: {stderr}")
    return elapsed, int(rss_kb) / 1024


def _idle_passes(with_index: Path, without_index: Path, rounds: int) -> tuple[float, float]:
    from docket.adapters.world.clock import FixedClock
    from docket.adapters.service_layer.kernel.effector import Effector
    from docket.adapters.service_layer.kernel.ledger import Ledger

    for path in (with_index, without_index):
        with sqlite3.connect(path) as conn:  # the first run's outcome: its intent stays pending
            conn.execute("DELETE FROM stored_events WHERE rowid = 4 AND topic = 'RunBasePinned.v1'")
    ledgers = [Ledger(with_index), Ledger(without_index)]
    with sqlite3.connect(without_index) as conn:  # Ledger() made the index on open: take it away again
        conn.execute("DROP INDEX IF EXISTS stored_events_topic")
    effectors = [Effector(ledger, FixedClock(stamp(2_000_000))) for ledger in ledgers]
    times: list[list[float]] = [[], []]
    try:
        for effector in effectors:
            effector.run_pending(only=())  # warm-up: the cursor settles just below the pending intent
        assert [p.position for p in ledgers[0].pending_intents()] == [3]
        for i in range(rounds):
            for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                times[k].append(timed(lambda effector=effectors[k]: effector.run_pending(only=())))
    finally:
        for ledger in ledgers:
            ledger.close()
    return median(times[0]), median(times[1])


def _append_cost(saves: int) -> tuple[float, float]:
    from docket.adapters.world.ledger import store

    from docket.domain.events import TaskPlanned
    from docket.domain.kernel.streams import task_stream

    events = [TaskPlanned(stream=task_stream(f"t{i}"), version=1, recorded_at=stamp(i + 1), task_id=f"t{i}",
                          run_id="run-bench", title=f"task {i}") for i in range(saves)]
    with_t, without_t = [], []
    original = store.CREATE_TOPIC_INDEX
    for i in range(5):
        for indexed in ((True, False) if i % 2 == 0 else (False, True)):
            folder = temp_dir()
            store.CREATE_TOPIC_INDEX = original if indexed else "SELECT 1"
            try:
                ledger = new_ledger(folder / "ledger.sqlite")
                (with_t if indexed else without_t).append(timed(lambda: [ledger.append([e]) for e in events]))
                ledger.close()
            finally:
                store.CREATE_TOPIC_INDEX = original
                remove(folder)
    return median(with_t), median(without_t)


def run(quick: bool) -> list[Row]:
    size = 200_000 if quick else 1_000_000
    rounds = 5 if quick else 11
    source = cached_ledger(size)
    folder = temp_dir()
    rows: list[Row] = []
    try:
        path, bare = folder / "ledger.sqlite", folder / "no-index.sqlite"
        shutil.copyfile(source, path)
        shutil.copyfile(source, bare)
        with_index, without_index = _idle_passes(path, bare, rounds)
        bare.unlink()
        log(f"idle effector pass: {with_index * 1000:.2f} ms with the topic index, "
            f"{without_index * 1000:.1f} ms without")
        rows += [
            Row("idle", f"effector idle pass, intent pending at 3, no topic index, {size:,} events", without_index,
                "s"),
            Row("idle", f"effector idle pass, intent pending at 3, topic index, {size:,} events", with_index, "s",
                ratio=with_index / without_index, goal=f"< {EFFECTOR_GOAL * 1000:.0f} ms",
                passed=with_index < EFFECTOR_GOAL),
        ]
        saves = 500 if quick else 2000
        indexed, plain = _append_cost(saves)
        rows.append(Row("idle", f"append with vs without the topic index, {saves:,} x 1 event (info)",
                        indexed / saves * 1000, "ms", ratio=indexed / plain, goal="(info)"))

        docket = [str(BIN / "docket")]
        where = ["--ledger", str(path)]
        _process([*docket, "status", *where])  # builds the views from position 1, with their checkpoints
        floor = median([_process([sys.executable, "-c", "pass"])[1] for _ in range(3)])
        for label, extra in (("human", []), ("--json", ["--json"])):
            seconds, rss = _process([*docket, "log", *extra, *where])
            log(f"log {label}: {rss:.0f} MB peak RSS, {seconds:.1f} s")
            rows.append(Row("idle", f"'docket log {' '.join(extra)}' peak RSS, {size:,} events ({seconds:.0f} s)"
                            .replace("log  ", "log "), rss, "MB", ratio=rss / floor,
                            goal=f"< {RSS_GOAL_MB} MB", passed=rss < RSS_GOAL_MB))

        run_id = f"run-{size // 5000 // 2:05d}"
        log_run, python = [], []
        for i in range(rounds):
            for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                if k == 0:
                    log_run.append(_process([*docket, "log", "--run", run_id, *where])[0])
                else:
                    python.append(_process([sys.executable, "-c", "pass"])[0])
        lr, py = median(log_run), median(python)
        log(f"log --run: {lr:.3f} s; python -c pass {py:.3f} s")
        rows += [Row("idle", f"'docket log --run' (5,000 of {size:,} events), median of {rounds}", lr, "s",
                     ratio=lr / py, goal=f"< {LOG_RUN_GOAL} s (ratio: vs python -c pass)",
                     passed=lr < LOG_RUN_GOAL)]

        points = [str(p) for p in (size // 10, size // 3, size * 7 // 9, size - 1)] + [stamp(size // 2 + 123)]
        at_t: dict[str, list[float]] = {p: [] for p in points}
        now_t: list[float] = []
        for i in range(max(3, rounds // 2)):
            now_t.append(_process([*docket, "status", *where])[0])
            for p in points:
                at_t[p].append(_process([*docket, "status", "--at", p, *where])[0])
        now = median(now_t)
        worst = max(median(ts) for ts in at_t.values())
        log("status --at: " + ", ".join(f"{p}: {median(ts):.3f} s" for p, ts in at_t.items()) + f"; status {now:.3f} s")
        checkpoint_bytes = sum(f.stat().st_size for f in folder.glob("*.checkpoints/*"))
        rows += [
            Row("idle", "'docket status' (current views)", now, "s"),
            Row("idle", f"slowest 'docket status --at' of {len(points)} points over {size:,} events", worst, "s",
                ratio=worst / now, goal=f"< {STATUS_AT_GOAL:.0f} s (ratio: vs status)",
                passed=worst < STATUS_AT_GOAL),
            Row("idle", "disk taken by the views' checkpoints", checkpoint_bytes / 1024 / 1024, "MB"),
        ]
    finally:
        remove(folder)
    return rows
