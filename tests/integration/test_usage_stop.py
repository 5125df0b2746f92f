"""The hard stop at a run's max cost or tokens, on a real ledger file: decided in the write transaction, so two
processes checking at the same moment record RunUsageExhausted once; its read model; a RunOpened.v1 still loads."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.projector import catch_up, open_views
from docket.adapters.service_layer.use_cases.runs import load_run, open_run
from docket.adapters.service_layer.use_cases.usage import run_usage, stop_when_spent
from docket.adapters.service_layer.use_cases.worker_generations import register_worker
from docket.adapters.world.clock import FixedClock
from docket.adapters.world.ledger.reader import ledger_reader
from docket.domain import events as ev
from docket.domain.usage import Usage
from docket.projections import runs, usage, workers

T0 = "2026-01-01T00:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, ledger_path: Path) -> tuple[Path, str | None]:
    """Where a ledger is: a SQLite file, or a PostgreSQL database (url) of this test's own."""
    return ledger_path, request.getfixturevalue("postgres_url") if request.param == "postgres" else None


def open_limited_run(ledger: Ledger, repo: Path, run_id: str, *, max_cost=None, max_tokens=None,
                     worker_ids=("w1",)) -> None:
    clock = FixedClock(T0)
    open_run(ledger, clock, run_id=run_id, intent_id=f"i-{run_id}", goal="g", target_branch="main", budget_ms=None,
             repository=str(repo / ".git"), max_cost_micro_usd=max_cost, max_tokens=max_tokens)
    for worker_id in worker_ids:
        register_worker(ledger, clock, run_id, f"{run_id}-{worker_id}", "implementer", None)


def report(ledger: Ledger, run_id: str, worker_id: str, generation: int, *, input_tokens=None, output_tokens=None,
           cost=None) -> None:
    stream = f"worker:{run_id}-{worker_id}"
    version = ledger.history(stream)[-1][1].version + 1
    ledger.append([ev.AgentReported(stream=stream, version=version, recorded_at=T0, run_id=run_id,
                                    worker_id=f"{run_id}-{worker_id}", generation=generation, agent="claude",
                                    format="claude-json", session_id=None, input_tokens=input_tokens,
                                    output_tokens=output_tokens, cost_micro_usd=cost, turns=None, is_error=None)])


def exhausted(ledger: Ledger) -> list[ev.RunUsageExhausted]:
    return [e for _, e in ledger.events_of(ev.RunUsageExhausted)]  # type: ignore[misc]


def test_the_run_stops_once_its_reports_reach_max_cost_and_only_once(repo, store):
    ledger = Ledger(store[0], url=store[1])
    ledger.initialise(T0)
    clock = FixedClock(T0)
    open_limited_run(ledger, repo, "r1", max_cost=2_500_000, worker_ids=("w1", "w2"))
    report(ledger, "r1", "w1", 1, input_tokens=100, output_tokens=10, cost=1_500_000)
    assert not stop_when_spent(ledger, clock, "r1") and load_run(ledger, "r1").status == "active"
    report(ledger, "r1", "w1", 1, cost=1_500_000)  # the same generation's use, said again: not counted twice
    assert not stop_when_spent(ledger, clock, "r1")
    report(ledger, "r1", "w2", 1, cost=1_000_000)
    assert run_usage(ledger, "r1") == Usage(100, 10, 2_500_000)
    assert stop_when_spent(ledger, clock, "r1")
    assert not stop_when_spent(ledger, clock, "r1")
    (stopped,) = exhausted(ledger)
    assert (stopped.run_id, stopped.limit, stopped.max, stopped.used) == ("r1", "cost", 2_500_000, 2_500_000)
    run = load_run(ledger, "r1")
    assert (run.status, run.limited_by) == ("budget-limited", "cost")
    ledger.close()


def test_a_run_without_limits_or_another_runs_reports_never_stop_it(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    open_limited_run(ledger, repo, "free")
    open_limited_run(ledger, repo, "capped", max_tokens=1_000)
    report(ledger, "free", "w1", 1, input_tokens=10**9, output_tokens=10**9)
    assert not stop_when_spent(ledger, clock, "free") and not stop_when_spent(ledger, clock, "capped")
    report(ledger, "capped", "w1", 1, input_tokens=999, output_tokens=None)
    assert not stop_when_spent(ledger, clock, "capped")
    report(ledger, "capped", "w1", 2, output_tokens=1)
    assert stop_when_spent(ledger, clock, "capped")
    assert [(e.run_id, e.limit, e.used) for e in exhausted(ledger)] == [("capped", "tokens", 1_000)]
    ledger.close()


ROUNDS = 15


def _checker(path: str, url: str | None, barrier, results) -> None:
    ledger = Ledger(Path(path), url=url, lock_timeout=120)
    clock = FixedClock(T0)
    recorded = []
    for i in range(ROUNDS):
        barrier.wait()
        recorded.append(stop_when_spent(ledger, clock, f"r{i}"))
    results.put(recorded)
    ledger.close()


def test_two_processes_checking_at_once_record_the_stop_once(repo, store):
    ledger = Ledger(store[0], url=store[1])
    ledger.initialise(T0)
    for i in range(ROUNDS):
        open_limited_run(ledger, repo, f"r{i}", max_cost=1)
        report(ledger, f"r{i}", "w1", 1, cost=5)
    ledger.close()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_checker, args=(str(store[0]), store[1], barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    first, second = (results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert [a + b for a, b in zip(first, second)] == [1] * ROUNDS  # in each round exactly one recorded it
    ledger = Ledger(store[0], url=store[1])
    assert sorted(e.run_id for e in exhausted(ledger)) == sorted(f"r{i}" for i in range(ROUNDS))
    ledger.close()


def test_the_read_models_keep_the_limits_the_spend_per_run_and_task_and_what_stopped_it(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    from docket.adapters.service_layer.use_cases.tasks import plan_task

    open_run(ledger, clock, run_id="r1", intent_id="i1", goal="g", target_branch="main", budget_ms=None,
             repository=str(repo / ".git"), max_cost_micro_usd=1_000_000, max_tokens=5_000)
    plan_task(ledger, clock, "r1", "t1", "one")
    plan_task(ledger, clock, "r1", "t2", "two")
    register_worker(ledger, clock, "r1", "r1-w1", "implementer", "t1")
    register_worker(ledger, clock, "r1", "r1-w2", "implementer", "t2")
    register_worker(ledger, clock, "r1", "r1-w3", "implementer", "t2")
    report(ledger, "r1", "w1", 1, input_tokens=100, output_tokens=20, cost=300_000)
    report(ledger, "r1", "w1", 1, input_tokens=150, output_tokens=None, cost=None)  # the largest of each counts
    report(ledger, "r1", "w1", 2, input_tokens=1, output_tokens=1, cost=100_000)
    report(ledger, "r1", "w2", 1, input_tokens=None, output_tokens=None, cost=None)  # reported nothing
    assert stop_when_spent(ledger, clock, "r1") is False
    report(ledger, "r1", "w3", 1, cost=600_000)
    assert stop_when_spent(ledger, clock, "r1") is True
    with ledger_reader(ledger_path) as reader:
        views = open_views(tmp_path / "views.sqlite")
        catch_up(reader, views)
    conn = views.conn
    row = runs.get_run(conn, "r1")
    assert (row["status"], row["limited_by"], row["max_cost_micro_usd"], row["max_tokens"]) == \
        ("budget-limited", "cost", 1_000_000, 5_000)
    assert usage.spend_of_run(conn, "r1") == {"input_tokens": 151, "output_tokens": 21, "tokens": 172,
                                              "cost_micro_usd": 1_000_000, "reports": 5}
    task_of = {w["worker_id"]: w["task_id"] for w in workers.workers_of(conn, "r1")}
    assert usage.spend_by_task(conn, "r1", task_of) == {
        "t1": {"input_tokens": 151, "output_tokens": 21, "tokens": 172, "cost_micro_usd": 400_000, "reports": 3},
        "t2": {"input_tokens": None, "output_tokens": None, "tokens": None, "cost_micro_usd": 600_000, "reports": 2},
    }
    assert usage.spend_of_run(conn, "nobody") == usage.NO_SPEND
    ledger.close()


def test_a_run_opened_v1_still_loads_and_projects_without_limits(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append([ev.RunOpened(stream="run:old", version=1, recorded_at=T0, run_id="old", goal="g",
                                target_branch="main", budget_ms=60_000)])
    run = load_run(ledger, "old")
    assert (run.status, run.budget_ms, run.max_cost_micro_usd, run.max_tokens) == ("opening", 60_000, None, None)
    assert not stop_when_spent(ledger, FixedClock(T0), "old")
    with ledger_reader(ledger_path) as reader:
        views = open_views(tmp_path / "views.sqlite")
        catch_up(reader, views)
    row = runs.get_run(views.conn, "old")
    assert (row["budget_ms"], row["max_cost_micro_usd"], row["max_tokens"]) == (60_000, None, None)
    ledger.close()
