"""Snapshots: a command on a long stream folds only the events after its snapshot, and gets the same state.

A snapshot is not part of the chain, so it is never trusted blindly: it names the
digest at its position (a snapshot of a rewritten ledger is not used), a damaged
one is ignored, and `Ledger.snapshot_drift` (what replay runs) recomputes each
one from the events.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docket.adapters.service_layer.kernel.effector import Effector
from docket.adapters.service_layer.use_cases.leases import expire_lease, grant_lease, release_lease, renew_lease
from docket.adapters.service_layer.kernel.ledger import SNAPSHOT_EVERY, Ledger
from docket.adapters.service_layer.use_cases.runs import open_run, pause_run, resume_run
from docket.adapters.service_layer.use_cases.worker_generations import register_worker
from docket.adapters.world.clock import FixedClock
from docket.domain import lease, run
from docket.domain.aggregate import fold
from docket.domain.kernel.errors import DocketError

T0 = "2026-01-01T00:00:00.000Z"


def leased_ledger(path, repo, renewals: int) -> tuple[Ledger, FixedClock, int]:
    ledger = Ledger(path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    open_run(ledger, clock, run_id="r1", intent_id="i1", goal="g", target_branch="main", budget_ms=None,
             repository=str(repo / ".git"))
    Effector(ledger, clock).run_pending()
    register_worker(ledger, clock, "r1", "w1", "implementer", None)
    token = grant_lease(ledger, clock, "wt", "w1", 1, 60_000).last[0]
    for _ in range(renewals):
        clock.advance(1_000)
        renew_lease(ledger, clock, "wt", token, 60_000)
    return ledger, clock, token


def truth(ledger: Ledger, apply, stream: str):
    return fold(apply, ledger.history(stream))


def test_a_long_stream_is_folded_from_its_snapshot(repo, ledger_path):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=250)
    stream = lease.stream_of("wt")
    with ledger.recorder.datastore.transaction(commit=False) as c:
        version, position, _ = ledger.recorder.select_snapshot(c, stream)
    assert version > 250 - SNAPSHOT_EVERY and position > 0
    assert len(ledger.history(stream, after_version=version)) < SNAPSHOT_EVERY  # all a command folds
    assert ledger.get(lease.apply, stream) == truth(ledger, lease.apply, stream)
    ledger.close()


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["renew", "renew", "renew", "release", "grant", "expire", "pause", "resume"]),
                max_size=40))
def test_state_from_snapshots_equals_folding_everything(tmp_path_factory, ops):
    from ..conftest import git

    folder = tmp_path_factory.mktemp("snap")
    repo = folder / "repo"
    git(folder, "init", "-q", "-b", "main", str(repo))
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    ledger, clock, token = leased_ledger(folder / "ledger.sqlite", repo, renewals=0)
    for op in ops:
        clock.advance(30_000)
        try:
            if op == "renew":
                renew_lease(ledger, clock, "wt", token, 60_000)
            elif op == "release":
                release_lease(ledger, clock, "wt", token)
            elif op == "grant":
                token = grant_lease(ledger, clock, "wt", "w1", 1, 60_000).last[0]
            elif op == "expire":
                expire_lease(ledger, clock, "wt")
            elif op == "pause":
                pause_run(ledger, clock, "r1", None)
            else:
                resume_run(ledger, clock, "r1")
        except DocketError:
            pass  # refused by an invariant: nothing appended
        for apply, stream in ((lease.apply, lease.stream_of("wt")), (run.apply, run.stream_of("r1"))):
            assert ledger.get(apply, stream) == truth(ledger, apply, stream)
    assert ledger.snapshot_drift(repair=False) == []
    ledger.close()


def _forge(path, sql: str, *params) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, params)
    conn.close()


def test_a_forged_snapshot_is_found_by_the_drift_check_and_repaired(repo, ledger_path):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=25)
    stream = lease.stream_of("wt")
    real = ledger.get(lease.apply, stream)
    _forge(ledger_path, "UPDATE snapshots SET state = replace(state, ?, ?) WHERE stream = ?",
           b'"status":"held"', b'"status":"released"', stream)
    assert ledger.get(lease.apply, stream) == real  # a process that already folded the stream folds on from that
    fresh = Ledger(ledger_path)  # a new process starts from the snapshot:
    assert fresh.get(lease.apply, stream) != real  # what the forgery would make a decision see...
    fresh.close()
    assert ledger.snapshot_drift(repair=True) == [stream]  # ...until replay's check finds and repairs it
    fresh = Ledger(ledger_path)
    assert fresh.get(lease.apply, stream) == real
    fresh.close()
    assert ledger.snapshot_drift(repair=False) == []
    ledger.close()


@pytest.mark.parametrize("damage", [
    ("UPDATE snapshots SET state = X'7b7d' WHERE stream = ?",),  # '{}': not the shape of a Lease
    ("UPDATE snapshots SET state = X'ff00' WHERE stream = ?",),  # not JSON at all
    ("UPDATE snapshots SET digest = '00' WHERE stream = ?",),  # taken on another (or a rewritten) ledger
])
def test_an_unusable_snapshot_is_ignored_and_the_stream_folded_from_its_start(repo, ledger_path, damage):
    ledger, clock, token = leased_ledger(ledger_path, repo, renewals=25)
    stream = lease.stream_of("wt")
    _forge(ledger_path, damage[0], stream)
    assert ledger.get(lease.apply, stream) == truth(ledger, lease.apply, stream)
    clock.advance(1_000)
    renew_lease(ledger, clock, "wt", token, 60_000)  # commands go on
    assert ledger.get(lease.apply, stream) == truth(ledger, lease.apply, stream)
    ledger.close()
