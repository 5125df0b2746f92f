"""Ledger.decide: a decision that reads several streams sees one consistent ledger.

The decision runs inside the append's write transaction, so another writer in
another process cannot change what it read (the run, the worker, the lease)
before its event is appended. Reproduced before the fix: a lease granted after
its run was aborted, and a lease granted to a generation fenced by a racing
relaunch.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from docket.adapters.service_layer.use_cases.leases import grant_lease
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.runs import abort_run, load_run, open_run
from docket.adapters.service_layer.use_cases.worker_generations import register_worker, relaunch_worker
from docket.adapters.world.clock import FixedClock
from docket.domain import run as run_aggregate
from docket.domain.kernel.errors import Conflict, DocketError, Refused

T0 = "2026-01-01T00:00:00.000Z"


def setup_run(ledger: Ledger, repo: Path, run_id: str, workers: tuple[str, ...] = ("w1", "w2")) -> None:
    clock = FixedClock(T0)
    open_run(ledger, clock, run_id=run_id, intent_id=f"i-{run_id}", goal="g", target_branch="main",
             budget_ms=None, repository=str(repo / ".git"), wait=False)  # its intent stays pending
    for worker_id in workers:
        register_worker(ledger, clock, run_id, f"{run_id}-{worker_id}", "implementer", None)


def invalid_grants(path: Path) -> list[str]:
    """Every grant that the ledger, read in order, says should never have been made."""
    ledger = Ledger(path)
    try:
        events = [e for _, e in _all_events(ledger)]
    finally:
        ledger.close()
    closed, generation, held = set(), {}, {}
    problems = []
    for e in events:
        kind = e.type_name()
        if kind == "RunAborted.v1":
            closed.add(e.run_id)
        elif kind == "WorkerRegistered.v1":
            generation[e.worker_id] = 1
        elif kind == "WorkerRelaunched.v1":
            generation[e.worker_id] = e.generation
        elif kind == "LeaseGranted.v1":
            if e.run_id in closed:
                problems.append(f"{e.resource}: granted after run {e.run_id} was aborted")
            if generation.get(e.worker_id) != e.generation:
                problems.append(f"{e.resource}: granted to fenced generation {e.generation} of {e.worker_id}")
            holder = held.get(e.resource)
            if holder and generation.get(holder[0]) == holder[1] and e.supersedes_token is None:
                problems.append(f"{e.resource}: granted twice")
            held[e.resource] = (e.worker_id, e.generation)
        elif kind in ("LeaseReleased.v1", "LeaseExpired.v1"):
            held.pop(e.resource, None)
    return problems


def _all_events(ledger: Ledger):
    from docket.adapters.world.ledger.store import decode_event

    for n in ledger.recorder.select_notifications(start=1, limit=10**9):
        yield n.id, decode_event(n.originator_id, n.originator_version, n.topic, n.state)


def test_a_writer_racing_a_decision_waits_for_it(repo, ledger_path):
    """Deterministic: `run abort` in another process starts while a grant is being decided.

    Before the fix the abort committed in the middle of the decision and the grant
    was appended after it; now the abort waits for the grant's transaction.
    """
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    setup_run(ledger, repo, "r1")
    clock = FixedClock(T0)
    abort = None

    def grant_while_aborting(now):
        nonlocal abort
        from docket.domain import lease, run, worker

        r = ledger.get(run.apply, "run:r1")
        w = ledger.get(worker.apply, "worker:r1-w1")
        abort = subprocess.Popen(
            [sys.executable, "-m", "docket", "run", "abort", "r1", "--reason", "race", "--ledger", str(ledger_path)],
            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            abort.wait(timeout=3)  # before the fix it finished here, between our read and our append
        except subprocess.TimeoutExpired:
            pass  # it waits for our write lock
        return lease.grant(None, None, w, 1, r, "wt", 60_000, now)

    ledger.decide(grant_while_aborting, clock.now())
    _, stderr = abort.communicate(timeout=60)
    assert abort.returncode == 0, stderr
    assert invalid_grants(ledger_path) == []
    kinds = [e.type_name() for _, e in _all_events(ledger)]
    assert kinds.index("LeaseGranted.v1") < kinds.index("RunAborted.v1")
    ledger.close()


def test_reads_inside_a_decision_see_what_the_append_is_made_on(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    setup_run(ledger, repo, "r1")
    head = ledger.head()
    seen = []

    def decision(now):
        seen.append((ledger.head(), len(ledger.pending_intents(after=0))))
        return run_aggregate.pause(load_run(ledger, "r1"), None, now)

    with pytest.raises(Refused):  # the run is still "opening": nothing is appended
        ledger.decide(decision, T0)
    assert seen == [(head, 1)] and ledger.head() == head
    ledger.close()


def test_a_decision_that_collides_with_itself_is_a_conflict_not_a_crash(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    setup_run(ledger, repo, "r1")
    from docket.domain.events import RunPaused

    stale = RunPaused(stream="run:r1", version=2, recorded_at=T0, run_id="r1", reason=None)  # version 2 is taken
    with pytest.raises(Conflict) as conflict:
        ledger.decide(lambda now: stale, T0)
    assert conflict.value.code == "concurrent-update" and conflict.value.exit_code == 3
    ledger.close()


# Many rounds of real races between processes --------------------------------------------

ROUNDS = 40


def _racer(path: str, role: str, barrier, rounds: int, results) -> None:
    ledger = Ledger(Path(path), lock_timeout=120)
    clock = FixedClock(T0)
    outcomes = []
    for i in range(rounds):
        run_id = f"{role.split(':')[0]}{i}"
        barrier.wait()
        try:
            if role == "abort:aborter":
                abort_run(ledger, clock, run_id, "race")
            elif role == "relaunch:relauncher":
                relaunch_worker(ledger, clock, f"{run_id}-w1")
            elif role == "two:second":
                grant_lease(ledger, clock, f"res-{run_id}", f"{run_id}-w2", 1, 60_000)
            else:  # the granting side of every pair
                grant_lease(ledger, clock, f"res-{run_id}", f"{run_id}-w1", 1, 60_000)
            outcomes.append("ok")
        except DocketError as e:
            outcomes.append(e.code)
    results.put((role, outcomes))
    ledger.close()


@pytest.mark.slow
@pytest.mark.parametrize("pair", [("abort:granter", "abort:aborter"), ("relaunch:granter", "relaunch:relauncher"),
                                  ("two:first", "two:second")])
def test_many_rounds_of_racing_processes_make_no_invalid_grant(repo, ledger_path, pair):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    prefix = pair[0].split(":")[0]
    for i in range(ROUNDS):
        setup_run(ledger, repo, f"{prefix}{i}")
    from docket.adapters.service_layer.kernel.effector import Effector

    Effector(ledger, FixedClock(T0)).run_pending()  # every run active
    ledger.close()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(str(ledger_path), role, barrier, ROUNDS, results)) for role in pair]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert invalid_grants(ledger_path) == []
    if prefix == "two":  # exactly one of each pair of grants wins
        for first, second in zip(outcomes["two:first"], outcomes["two:second"]):
            assert sorted([first, second]) == ["lease-held", "ok"]
    else:
        assert all(o in ("ok", "run-closed", "stale-generation") for o in outcomes[pair[0]]), outcomes
