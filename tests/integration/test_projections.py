"""Projections: position written with the rows, deterministic rebuild, ledger identity."""

from __future__ import annotations

import sqlite3

from docket.adapters.service_layer.kernel.effector import Effector
from docket.adapters.service_layer.use_cases.leases import grant_lease
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.projector import catch_up, open_views
from docket.adapters.service_layer.use_cases.runs import load_run, open_run, pause_run
from docket.adapters.service_layer.use_cases.tasks import plan_task
from docket.adapters.service_layer.use_cases.worker_generations import register_worker, relaunch_worker
from docket.adapters.world.clock import FixedClock
from docket.adapters.world.ledger.reader import ledger_reader
from docket.domain import run as run_aggregate
from docket.domain.containment.processes import ProcessIdentity
from docket.projections import intents, leases, runs, workers
from docket.projections.views import READ_MODELS

T0 = "2026-01-01T00:00:00.000Z"


def scenario(ledger: Ledger, repo, step: int) -> None:
    clock = FixedClock(T0)
    clock.advance(step * 10_000)  # each step later than the last: ledger time only runs forward
    run_id = f"r{step}"
    open_run(ledger, clock, run_id=run_id, intent_id=f"i{step}", goal="g", target_branch="main",
             budget_ms=60_000, repository=str(repo / ".git"))
    Effector(ledger, clock).run_pending()
    ledger.decide(lambda now: run_aggregate.supervised(load_run(ledger, run_id), f"s{step}",
                                                       ProcessIdentity("h", "b", 1, 1, "1"), now), clock.now())
    plan_task(ledger, clock, run_id, f"t{step}", "title")
    register_worker(ledger, clock, run_id, f"w{step}", "implementer", f"t{step}")
    grant_lease(ledger, clock, f"wt/{step}", f"w{step}", 1, 30_000)
    clock.advance(5_000)
    pause_run(ledger, clock, run_id, "lunch")
    relaunch_worker(ledger, clock, f"w{step}") if step % 2 else None


def rows(views):
    return {m.TABLE: views.table_rows(m.TABLE) for m in READ_MODELS}


def test_incremental_catch_up_equals_a_rebuild_from_position_one(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    incremental = open_views(tmp_path / "incremental.sqlite")
    with ledger_reader(ledger_path) as reader:
        for step in range(5):
            scenario(ledger, repo, step)
            catch_up(reader, incremental)
        rebuilt = open_views(tmp_path / "rebuilt.sqlite")
        catch_up(reader, rebuilt)
    assert rows(incremental) == rows(rebuilt)
    assert incremental.position() == rebuilt.position() == ledger.head()
    run = runs.get_run(rebuilt.conn, "r1")
    assert run["status"] == "paused" and run["used_ms"] == 5_000 and run["base_commit"]
    assert workers.workers_of(rebuilt.conn, "r1")[0]["generation"] == 2
    assert leases.leases_of(rebuilt.conn, "r2")[0]["status"] == "held"
    assert intents.pending(rebuilt.conn) == []
    ledger.close()


def test_views_stop_at_a_position_and_show_pending_intents(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    open_run(ledger, FixedClock(T0), run_id="r1", intent_id="i1", goal="g", target_branch="main",
             budget_ms=None, repository=str(repo / ".git"))
    Effector(ledger, FixedClock(T0)).run_pending()
    with ledger_reader(ledger_path) as reader:
        before = open_views(":memory:")
        catch_up(reader, before, until=3)
        assert [i["intent_id"] for i in intents.pending(before.conn)] == ["i1"]
        assert runs.get_run(before.conn, "r1")["status"] == "opening"
        after = open_views(":memory:")
        catch_up(reader, after)
        assert intents.pending(after.conn) == [] and runs.get_run(after.conn, "r1")["status"] == "active"
    ledger.close()


def test_views_of_another_ledger_are_rebuilt(repo, tmp_path):
    views_path = tmp_path / "views.sqlite"
    for name, steps in (("a.sqlite", 3), ("b.sqlite", 1)):
        ledger = Ledger(tmp_path / name)
        ledger.initialise(T0 if name == "a.sqlite" else "2026-02-02T00:00:00.000Z")
        for step in range(steps):
            scenario(ledger, repo, step)
        ledger.close()
        views = open_views(views_path)
        with ledger_reader(tmp_path / name) as reader:
            catch_up(reader, views)
        views.conn.close()
    views = open_views(views_path)
    assert [r["run_id"] for r in runs.list_runs(views.conn)] == ["r0"]


def test_a_failed_batch_leaves_rows_and_position_unchanged(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    scenario(ledger, repo, 0)
    views = open_views(tmp_path / "v.sqlite")
    bad = [(2, "run:x", 1, "RunOpened.v1", b"not json")]
    try:
        views.apply(bad, lambda p: "")
    except ValueError:
        pass
    assert views.position() == 0
    assert sqlite3.connect(tmp_path / "v.sqlite").execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    ledger.close()
