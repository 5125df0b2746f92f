"""A run's max cost and max tokens are a hard stop (issue 24, part 4): an agent that reports usage past the run's
max cost stops the run budget-limited, the other agent still working is stopped for the budget, the stop is
recorded once, and `docket status` shows what was spent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.go_world import docket_processes, make_go_world, wait_until

pytestmark = pytest.mark.slow

RESULT = json.dumps({"type": "result", "is_error": False, "num_turns": 3, "session_id": "sess-a",
                     "total_cost_usd": 3.0, "usage": {"input_tokens": 1200, "output_tokens": 300}})
TASKS = f'''\
[[tasks]]
id = "a"
title = "spends past the max cost"
prompt = """wait for go.flag
write a.py: A = 1
say: {RESULT}
"""

[[tasks]]
id = "b"
title = "works on and on"
prompt = """hang
"""
'''


def test_an_agent_reporting_a_cost_past_max_cost_stops_the_run_and_the_other_agent(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", idle_timeout="5m", tasks=TASKS,
                          agent_extra='report = "claude-json"')
    process = world.start("go", "--goal", "spend", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--parallel", "2", "--max-cost", "2.50", "--json")
    try:
        assert wait_until(lambda: len(world.events("WorkerLaunched")) == 2, timeout=120), "both agents never ran"
        (created,) = [e for e in world.events("WorktreeCreated") if e["payload"]["task_id"] == "r1.a"]
        (Path(created["payload"]["path"]) / "go.flag").write_text("")  # b runs: now a reports and exits
        stdout, stderr = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 7, stderr
    summary = json.loads(stdout)
    assert (summary["status"], summary["outcome"], summary["limited_by"]) == ("budget-limited", "stopped", "cost")
    assert summary["spend"]["cost_micro_usd"] == 3_000_000

    (opened,) = world.events("RunOpened")
    assert opened["type"] == "RunOpened.v2"
    assert (opened["payload"]["max_cost_micro_usd"], opened["payload"]["max_tokens"]) == (2_500_000, None)
    (stopped,) = world.events("RunUsageExhausted")
    assert stopped["payload"] == {"run_id": "r1", "limit": "cost", "max": 2_500_000, "used": 3_000_000}
    (reported,) = world.events("AgentReported")
    assert reported["payload"]["worker_id"] == "r1.a" and reported["position"] < stopped["position"]
    assert not world.events("RunBudgetExhausted")

    exits = {e["payload"]["worker_id"]: e["payload"]["cause"] for e in world.events("WorkerExited")}
    assert exits == {"r1.a": "exited", "r1.b": "budget"}
    assert [e["payload"]["reason"] for e in world.events("WorkerStopRequested")
            if e["payload"]["worker_id"] == "r1.b"] == ["budget"]
    assert not world.events("ReceiptSealed")
    assert wait_until(lambda: docket_processes(world.ledger) == [])

    status = world.json("status", "r1")
    run = status["run"]
    assert (run["status"], run["limited_by"], run["max_cost_micro_usd"]) == ("budget-limited", "cost", 2_500_000)
    assert run["spend"] == {"input_tokens": 1200, "output_tokens": 300, "tokens": 1500, "cost_micro_usd": 3_000_000,
                            "reports": 1}
    spend = {t["task_id"]: t["spend"] for t in status["tasks"]}
    assert spend["r1.a"]["cost_micro_usd"] == 3_000_000 and spend["r1.b"]["reports"] == 0
    text = world.run("status", "r1").stdout
    assert "spend: 1500 tokens (1200 in, 300 out), $3.00 of max $2.50" in text
    assert "stopped: its max cost was reached" in text
    assert world.run("verify").returncode == 0


def test_a_bad_max_cost_in_docket_toml_is_refused_before_anything_is_recorded(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", extra_config='\n[run]\nmax_cost = "a lot"\n')
    done = world.go("r1", "--target", "trunk")
    assert done.returncode == 2
    assert done.stderr.startswith("docket: error: bad-config: ") and "run.max_cost" in done.stderr
    assert "Traceback" not in done.stderr
    assert not world.events("RunOpened")


def test_a_bad_max_cost_or_max_tokens_option_is_bad_input(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk")
    done = world.go("r1", "--target", "trunk", "--max-cost", "-1")
    assert (done.returncode, done.stderr.split(":")[:3]) == (2, ["docket", " error", " bad-cost"])
    done = world.go("r1", "--target", "trunk", "--max-tokens", "lots")
    assert (done.returncode, done.stderr.split(":")[:3]) == (2, ["docket", " error", " bad-count"])
    assert not world.events("RunOpened")


def test_run_open_records_the_limits_from_its_options_or_docket_toml(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", extra_config="\n[run]\nmax_cost = 0.75\nmax_tokens = 5000\n")
    opened = world.json("run", "open", "--target", "trunk", "--goal", "g", "--id", "r1")
    assert (opened["run"]["max_cost_micro_usd"], opened["run"]["max_tokens"]) == (750_000, 5_000)
    opened = world.json("run", "open", "--target", "trunk", "--goal", "g", "--id", "r2", "--max-cost", "$1.25",
                        "--max-tokens", "70")
    assert (opened["run"]["max_cost_micro_usd"], opened["run"]["max_tokens"]) == (1_250_000, 70)
    recorded = {e["payload"]["run_id"]: (e["type"], e["payload"]["max_cost_micro_usd"], e["payload"]["max_tokens"])
                for e in world.events("RunOpened")}
    assert recorded == {"r1": ("RunOpened.v2", 750_000, 5_000), "r2": ("RunOpened.v2", 1_250_000, 70)}
    status = world.run("status", "r2").stdout
    assert "spend: nothing reported by its agents (max $1.25, max 70 tokens)" in status
