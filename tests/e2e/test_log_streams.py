"""`docket log` streams: --run through the views' run index lists what a full scan lists, in the same bytes."""

from __future__ import annotations

import json

from ..conftest import T0


def _two_runs(docket) -> None:
    docket("init", now=T0)
    for run in ("r1", "r2"):
        docket("run", "open", "--target", "main", "--goal", f"goal of {run}", "--id", run, now=T0)
        docket("task", "plan", run, "--title", "t", "--id", f"t-{run}", now=T0)
        docket("worker", "register", run, "--role", "implementer", "--id", f"w-{run}", now=T0)
    docket("run", "pause", "r1", now=T0)


def test_log_run_through_the_index_lists_what_the_whole_log_holds_for_that_run(docket):
    _two_runs(docket)
    everything = docket("log", "--json").json()
    for run in ("r1", "r2"):
        expected = [e for e in everything["events"]
                    if e["payload"].get("run_id") == run or e["stream"] == f"run:{run}"]
        listed = docket("log", "--run", run, "--json")
        assert listed.json() == {"events": expected, "head": everything["head"]}
        assert listed.stdout == json.dumps(listed.json(), ensure_ascii=False, sort_keys=True, indent=2) + "\n"
        typed = docket("log", "--run", run, "--type", "TaskPlanned", "--json").json()["events"]
        assert [e["type"] for e in typed] == ["TaskPlanned.v2"]


def test_log_run_without_usable_views_scans_and_lists_the_same(docket):
    _two_runs(docket)
    through_index = docket("log", "--run", "r1").stdout
    views = docket.ledger.with_name("views.sqlite")
    for leftover in views.parent.glob("views.sqlite*"):
        leftover.unlink()
    views.mkdir()  # not a file: the views cannot be opened
    scanned = docket("log", "--run", "r1")
    assert scanned.stdout == through_index and scanned.stdout.count("\n") >= 5
