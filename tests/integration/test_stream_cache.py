"""The stream cache: a process folds on from what it already folded, reading only the events appended since,
and never answers from memory what the ledger no longer holds.

Another process's appends, a decision made inside the write transaction, a stored event rewritten under the
process, a cut tail: each read still equals folding the stream from its start.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from docket.adapters.service_layer.use_cases.leases import renew_lease
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.stream_cache import StreamCache
from docket.domain import lease, run, worker
from docket.domain.aggregate import fold
from docket.domain.kernel.errors import DocketError

from .test_snapshots import leased_ledger

STREAM = lease.stream_of("wt")


def truth(path):
    other = Ledger(path)  # a connection of its own, with an empty cache
    try:
        return fold(lease.apply, other.history(STREAM))
    finally:
        other.close()


def rows_read(ledger: Ledger) -> list[int]:
    """Spy on the stream reads: the number of events each read of the stream brought back."""
    counts: list[int] = []
    select = ledger.recorder.select_stream

    depth = [0]

    def counted(*args, **kwargs):
        depth[0] += 1  # select_stream without a cursor opens one and calls itself: count the outer call
        try:
            rows = select(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            counts.append(len(rows))
        return rows

    ledger.recorder.select_stream = counted  # type: ignore[method-assign]
    return counts


def test_a_warm_read_reads_only_what_was_appended_since(repo, ledger_path):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=35)
    ledger.get(lease.apply, STREAM)
    expected = truth(ledger_path)
    counts = rows_read(ledger)
    assert ledger.get(lease.apply, STREAM) == expected
    assert counts == [1]  # the folded version's own event, to check it is still there: nothing else
    clock.advance(1_000)
    renew_lease(ledger, clock, "wt", token, 60_000)
    counts.clear()
    folded = ledger.get(lease.apply, STREAM)
    assert counts == [1]  # the decision's own append was folded on when it committed
    assert folded == truth(ledger_path)
    ledger.close()


def test_another_process_appends_and_the_next_read_and_decision_see_it(repo, ledger_path):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=3)
    before = ledger.get(lease.apply, STREAM)
    script = (
        "import sys\n"
        "from docket.adapters.service_layer.use_cases.leases import renew_lease\n"
        "from docket.adapters.service_layer.kernel.ledger import Ledger\n"
        "from docket.adapters.world.clock import FixedClock\n"
        "ledger = Ledger(__import__('pathlib').Path(sys.argv[1]))\n"
        "clock = FixedClock(sys.argv[3])\n"
        "for _ in range(3):\n"
        "    clock.advance(1_000)\n"
        "    renew_lease(ledger, clock, 'wt', int(sys.argv[2]), 60_000)\n"
        "ledger.close()\n")
    subprocess.run([sys.executable, "-c", script, str(ledger_path), str(token), clock.now()],
                   check=True)
    after = ledger.get(lease.apply, STREAM)
    assert after == truth(ledger_path) and after.version == before.version + 3
    clock.advance(1_000)  # earlier than what the other process recorded: ledger time is clamped to it
    renew_lease(ledger, clock, "wt", token, 60_000)  # decided on the latest version: no concurrent-update
    assert ledger.get(lease.apply, STREAM) == truth(ledger_path)
    assert ledger.get(lease.apply, STREAM).version == before.version + 4
    ledger.close()


def test_a_decision_reads_the_latest_version_inside_the_write_transaction(repo, ledger_path):
    """Two connections, each with its own cache, decide in turns on the same stream: each decision folds on
    from its stale entry through the write transaction's cursor, so neither is refused as a concurrent update."""
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=1)
    other = Ledger(ledger_path)
    other.get(lease.apply, STREAM)
    for i in range(6):
        clock.advance(1_000)
        renew_lease(ledger if i % 2 else other, clock, "wt", token, 60_000)
    assert ledger.get(lease.apply, STREAM) == other.get(lease.apply, STREAM) == truth(ledger_path)
    other.close()
    ledger.close()


@pytest.mark.parametrize("damage", [
    "UPDATE stored_events SET state = replace(state, '\"expires_at\":\"2026', '\"expires_at\":\"2027') "
    "WHERE originator_id = ? AND originator_version = (SELECT MAX(originator_version) FROM stored_events "
    "WHERE originator_id = ?)",  # the folded event's bytes rewritten in place
    "DELETE FROM stored_events WHERE originator_id = ? AND originator_version = (SELECT MAX(originator_version) "
    "FROM stored_events WHERE originator_id = ?)",  # the tail cut
])
def test_a_stream_changed_under_the_process_is_folded_again_not_answered_from_memory(repo, ledger_path, damage):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=4)
    cached = ledger.get(lease.apply, STREAM)
    conn = sqlite3.connect(ledger_path)
    with conn:
        changed = conn.execute(damage, (STREAM, STREAM)).rowcount
    conn.close()
    assert changed == 1
    assert ledger.get(lease.apply, STREAM) == truth(ledger_path) != cached
    ledger.close()


def test_a_refused_decision_leaves_nothing_it_did_not_commit_in_the_cache(repo, ledger_path):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=2)
    version = ledger.get(lease.apply, STREAM).version

    def decision(now):
        ledger.get(lease.apply, STREAM)
        _, last = ledger.history(STREAM)[-1]
        return [last.model_copy(update={"recorded_at": now})]  # a version the stream already has: refused

    with pytest.raises(DocketError):
        ledger.decide(decision, clock.now())
    assert ledger.get(lease.apply, STREAM).version == version
    assert ledger.get(lease.apply, STREAM) == truth(ledger_path)
    ledger.close()


def test_the_cache_keeps_at_most_its_limit_of_streams(repo, ledger_path):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=1)
    small = Ledger(ledger_path, streams=StreamCache(limit=2))
    for apply, stream in ((lease.apply, STREAM), (run.apply, "run:r1"), (worker.apply, "worker:w1")):
        assert small.get(apply, stream) is not None
    assert len(small.streams) == 2 and small.streams.get(STREAM, lease.apply) is None
    assert small.get(lease.apply, STREAM) == truth(ledger_path)
    small.close()
    ledger.close()


def _spy_intent_scans(ledger: Ledger) -> list[int]:
    starts: list[int] = []
    select = ledger.recorder.select_intent_events

    def spied(c, after, *types):
        starts.append(after)
        return select(c, after, *types)

    ledger.recorder.select_intent_events = spied  # type: ignore[method-assign]
    return starts


def test_a_named_intent_this_process_appended_is_looked_for_from_its_position(repo, ledger_path):
    from docket.adapters.service_layer.use_cases.runs import open_run
    from docket.adapters.world.clock import FixedClock

    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=20)
    open_run(ledger, clock, run_id="r2", intent_id="pin-r2", goal="g", target_branch="main", budget_ms=None,
             repository=str(repo / ".git"), wait=False)
    position = ledger.head()
    other = Ledger(ledger_path)  # another process's connection: it did not append the intent
    open_run(other, FixedClock(clock.now()), run_id="r3", intent_id="pin-r3", goal="g", target_branch="main",
             budget_ms=None, repository=str(repo / ".git"), wait=False)
    starts = _spy_intent_scans(ledger)
    assert [p.intent.intent_id for p in ledger.pending_intents(after=0, only={"pin-r2"})] == ["pin-r2"]
    assert starts == [position - 1]
    assert [p.intent.intent_id for p in ledger.pending_intents(after=0, only={"pin-r2", "pin-r3"})] == \
        ["pin-r2", "pin-r3"]
    assert starts[-1] == 0  # one of them is not this process's: the whole chain
    conn = sqlite3.connect(ledger_path)
    with conn:  # the row at the remembered position no longer holds that intent: it is not trusted
        conn.execute("UPDATE stored_events SET state = replace(state, 'pin-r2', 'pin-rX') WHERE rowid = ?",
                     (position,))
    conn.close()
    assert ledger.pending_intents(after=0, only={"pin-r2"}) == [] and starts[-1] == 0
    other.close()
    ledger.close()


def test_a_named_intent_resolved_since_is_not_pending(repo, ledger_path):
    from docket.adapters.service_layer.kernel.effector import Effector
    from docket.adapters.service_layer.use_cases.runs import open_run

    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=2)
    open_run(ledger, clock, run_id="r2", intent_id="pin-r2", goal="g", target_branch="main", budget_ms=None,
             repository=str(repo / ".git"), wait=False)
    assert len(Effector(ledger, clock).run_pending(only={"pin-r2"}, after=0)) == 1
    assert ledger.pending_intents(after=0, only={"pin-r2"}) == []
    ledger.close()


def _pending_as_data(pending):
    return [(p.position, p.intent.intent_id, p.last_unknown.intent_id if p.last_unknown else None) for p in pending]


def test_pending_intents_behind_a_stuck_cursor_are_folded_on_not_rescanned(repo, ledger_path):
    """An intent that stays pending holds the effector's cursor back; each search for pending intents reads only
    what was appended since the last one, and finds exactly what a fresh process scanning from the cursor finds."""
    from docket.adapters.service_layer.kernel.effector import Effector
    from docket.adapters.service_layer.use_cases.runs import open_run
    from docket.adapters.world.clock import FixedClock

    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=2)
    open_run(ledger, clock, run_id="stuck", intent_id="pin-stuck", goal="g", target_branch="main", budget_ms=None,
             repository=str(repo / ".git"), wait=False)
    other = Ledger(ledger_path)  # another process: its appends are found too
    for i in range(12):
        clock.advance(1_000)
        renew_lease(ledger, clock, "wt", token, 60_000)
        owner = other if i % 3 == 0 else ledger
        open_run(owner, FixedClock(clock.now()), run_id=f"q{i}", intent_id=f"pin-q{i}", goal="g",
                 target_branch="main", budget_ms=None, repository=str(repo / ".git"), wait=False)
        if i % 2:  # resolved: an outcome after it
            Effector(ledger, clock).run_pending(only={f"pin-q{i}"}, after=0)
        ledger.advance_effector_cursor()  # stays below pin-stuck
        fresh = Ledger(ledger_path)  # scans from the cursor, knowing nothing
        expected = _pending_as_data(fresh.pending_intents())
        fresh.close()
        assert _pending_as_data(ledger.pending_intents()) == expected
        assert "pin-stuck" in {intent_id for _, intent_id, _ in expected}
        scan = ledger.streams.pending_scan
        assert scan is not None and scan.start == ledger.effector_cursor() and scan.scanned_to == ledger.head()
    ledger.rewind_effector_cursor(0)  # replay puts it back: the scan starts afresh from there
    fresh = Ledger(ledger_path)
    assert _pending_as_data(ledger.pending_intents()) == _pending_as_data(fresh.pending_intents())
    assert ledger.streams.pending_scan.start == 0
    fresh.close()
    other.close()
    ledger.close()
