"""Ledger.decide: when another writer takes the stream version first, decide again on fresh state."""

from __future__ import annotations

import pytest

from docket.adapters import services
from docket.adapters.clock import FixedClock
from docket.adapters.ledger import Ledger
from docket.domain import lease as lease_aggregate
from docket.domain import run as run_aggregate
from docket.domain import worker as worker_aggregate
from docket.domain.errors import Conflict, Refused

T0 = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def ledgers(repo, ledger_path):
    ledger, other = Ledger(ledger_path), Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    services.open_run(ledger, clock, run_id="r1", intent_id="i1", goal="g", target_branch="main",
                      budget_ms=None, repository=str(repo / ".git"))
    for worker_id in ("w1", "w2"):
        services.register_worker(ledger, clock, "r1", worker_id, "implementer", None)
    yield ledger, other
    ledger.close()
    other.close()


def _grant_for(ledger, worker_id):
    run = ledger.get(run_aggregate.apply, "run:r1")
    worker = ledger.get(worker_aggregate.apply, f"worker:{worker_id}")
    current = ledger.get(lease_aggregate.apply, "lease:wt")
    holder = ledger.get(worker_aggregate.apply, f"worker:{current.worker_id}") if current else None
    return current, lease_aggregate.grant(current, holder, worker, 1, run, "wt", 60_000, T0)


def test_the_loser_decides_again_and_is_refused_by_the_fresh_state(ledgers):
    ledger, other = ledgers
    seen = []

    def decision():
        seen.append(ledger.get(lease_aggregate.apply, "lease:wt"))
        event = _grant_for(ledger, "w1")[1]
        if len(seen) == 1:
            other.append([_grant_for(other, "w2")[1]])  # another writer grants first, in between
        return event

    with pytest.raises(Refused) as refused:
        ledger.decide(decision)
    assert refused.value.code == "lease-held"
    assert seen[0] is None and seen[1].worker_id == "w2"
    grants = [e for _, e in ledger.history("lease:wt")]
    assert [(e.type_name(), e.worker_id) for e in grants] == [("LeaseGranted.v1", "w2")]


def test_a_second_collision_is_a_conflict(ledgers):
    ledger, other = ledgers
    stale = _grant_for(ledger, "w1")[1]  # decided on the empty stream: version 1
    other.append([_grant_for(other, "w2")[1]])  # another writer took version 1
    attempts = []

    def decision():
        attempts.append(stale)
        return stale  # a decision that keeps colliding

    with pytest.raises(Conflict) as conflict:
        ledger.decide(decision)
    assert conflict.value.code == "concurrent-update" and conflict.value.exit_code == 3
    assert len(attempts) == 2
