"""Threads of one process that write the same ledger take turns at an in-process lock before SQLite's: a thread
waiting for another thread's transaction waits on that lock (and the commit hands it on), not in SQLite's busy
handler, whose sleeps grow to 100 ms and end after the lock was freed. Processes still meet at SQLite's lock."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.runs import abort_run, load_run
from docket.adapters.world.clock import FixedClock
from docket.domain import lease, run, worker
from tests.integration.test_decide import T0, _all_events, setup_run

WAITS = {"_in_process_turn": "the in-process lock", "_begin_immediate": "SQLite's busy handler"}


def _where_it_waits(thread: threading.Thread) -> str:
    """Where thread waits for the write lock, once it does (its stack names one of WAITS)."""
    deadline = time.monotonic() + 60  # a bound on a hang, not a measurement
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None:
            if frame.f_code.co_name in WAITS:
                return WAITS[frame.f_code.co_name]
            frame = frame.f_back
        time.sleep(0.001)
    raise AssertionError("the second writer never reached the write lock")


def test_a_thread_waits_for_another_threads_transaction_on_the_in_process_lock(repo: Path, ledger_path: Path):
    first, second = Ledger(ledger_path), Ledger(ledger_path)  # two connections, as two of docket go's threads
    first.initialise(T0)
    setup_run(first, repo, "r1")
    clock = FixedClock(T0)
    aborted: list[BaseException | None] = []
    waited: list[str] = []

    def abort() -> None:
        try:
            abort_run(second, clock, "r1", "race")
            aborted.append(None)
        except BaseException as e:  # reported below
            aborted.append(e)

    def grant_while_the_other_thread_writes(now: str):
        aborter = threading.Thread(target=abort, daemon=True)
        aborter.start()
        waited.append(_where_it_waits(aborter))
        r = first.get(run.apply, "run:r1")
        w = first.get(worker.apply, "worker:r1-w1")
        grant.append(aborter)
        return lease.grant(None, None, w, 1, r, "wt", 60_000, now)

    grant: list[threading.Thread] = []
    first.decide(grant_while_the_other_thread_writes, clock.now())
    grant[0].join(timeout=60)
    assert waited == ["the in-process lock"]
    assert aborted == [None]  # its turn came once the grant committed
    kinds = [e.type_name() for _, e in _all_events(first)]
    assert kinds.index("LeaseGranted.v1") < kinds.index("RunAborted.v1")
    assert load_run(first, "r1").status == "aborted"
    first.close()
    second.close()
