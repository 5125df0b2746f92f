"""Issue 35: a run reads as what it came to, in the same words on every surface (domain/reports/outcome.py): `docket go`'s
summary, `docket status` (text and --json, one run and the runs list), `docket watch`, and the web pages. A run where
every task failed is "nothing delivered" (not a green "completed"), one that delivered some "partly delivered (n of
m)", one that delivered all "delivered", and one whose agent's question waits "waiting for you", marked [needs you]."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.e2e.go_world import agent_world, make_go_world, wait_until
from tests.e2e.test_serve import ASKING, Served

FAILING = '''\
[[tasks]]
id = "one"
title = "never compiles"
prompt = "write one.py: broken"

[[tasks]]
id = "two"
title = "never compiles either"
prompt = "write two.py: broken"
'''

HALF = '''\
[[tasks]]
id = "good"
title = "good"
prompt = "write good.py: X = 1"

[[tasks]]
id = "bad"
title = "never compiles"
prompt = "write bad.py: broken"
'''


def _run_line(status_text: str, run_id: str) -> str:
    (line,) = [line for line in status_text.splitlines() if line.startswith(run_id + " ")]
    return line


def test_a_run_where_every_task_failed_reads_nothing_delivered_everywhere(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=FAILING)
    done = world.run("go", "--goal", "two failures", "--tasks", "tasks.toml", "--id", "r1", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    assert "\nrun r1: nothing delivered (completed)\n" in done.stdout, done.stdout  # after the run's event lines
    # each failed task names its latest candidate, not "-"
    rows = [line for line in done.stdout.splitlines() if line.startswith(("  one: failed", "  two: failed"))]
    assert len(rows) == 2 and all(re.search(r"candidate [0-9a-f]{12},", row) for row in rows), done.stdout
    summary = json.loads(world.run("go", "--resume", "r1", "--json").stdout)
    assert summary["outcome"] == "failed" and summary["run_outcome"]["state"] == "nothing-delivered"
    assert all(row["candidate"] for row in summary["tasks"])

    status = world.run("status", "r1").stdout
    line = _run_line(status, "r1")
    assert "nothing delivered" in line and "completed" not in line and "[needs you]" not in line, status
    assert "  run status: completed\n" in status
    assert "(None)" not in status and "step(s) verified" not in status, status
    doc = world.json("status", "r1")
    assert doc["outcome"] == {"state": "nothing-delivered", "words": "nothing delivered", "detail": None,
                              "delivered": 0, "tasks": 2, "needs_you": False}
    assert doc["run"]["status"] == "completed"  # kept, beside the outcome
    (listed,) = world.json("status")["runs"]
    assert listed["outcome"] == doc["outcome"]
    assert "nothing delivered" in _run_line(world.run("status").stdout, "r1")

    assert world.run("watch", "r1", "--once").stdout.startswith("run r1: nothing delivered, ")
    assert world.json("watch", "r1")["outcome"] == doc["outcome"]

    served = Served(world)
    try:
        _, _, runs = served.request("/")
        _, _, run = served.request("/runs/r1")
    finally:
        served.stop()
    assert '<span class="outcome nothing-delivered">nothing delivered</span>' in runs
    assert '<span class="outcome nothing-delivered">nothing delivered</span>' in run.split("</h1>")[0]
    assert "needs-you" not in runs.split("<tbody>")[1]


def test_a_run_that_delivered_some_of_its_tasks_says_how_many(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=HALF)
    done = world.run("go", "--goal", "half", "--tasks", "tasks.toml", "--id", "r1", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    assert "\nrun r1: partly delivered (1 of 2) (completed)\n" in done.stdout, done.stdout
    assert "partly delivered (1 of 2)" in _run_line(world.run("status", "r1").stdout, "r1")
    assert "  integration: completed, 1 task(s) delivered, main at " in world.run("status", "r1").stdout
    assert world.json("status", "r1")["outcome"]["state"] == "partly-delivered"
    assert world.run("watch", "r1", "--once").stdout.startswith("run r1: partly delivered (1 of 2), ")


def test_a_fully_delivered_run_reads_delivered_and_says_what_it_delivered_not_its_steps(tmp_path: Path):
    world = make_go_world(tmp_path)  # three tasks, one repaired once
    done = world.run("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1")
    assert done.returncode == 0, done.stderr
    assert "\nrun r1: delivered (completed)\n" in done.stdout
    status = world.run("status", "r1").stdout
    assert re.match(r"r1 +delivered ", _run_line(status, "r1")), status
    assert "  integration: completed, 3 task(s) delivered, main at " in status and "step(s)" not in status
    doc = world.json("status", "r1")
    assert (doc["outcome"]["state"], doc["outcome"]["delivered"], doc["outcome"]["tasks"]) == ("delivered", 3, 3)
    served = Served(world)
    try:
        _, _, runs = served.request("/")
    finally:
        served.stop()
    assert '<span class="outcome delivered">delivered</span>' in runs


def test_a_run_whose_agent_asks_a_question_is_waiting_for_you_and_marked_in_the_runs_list(tmp_path: Path):
    tasks = '[[tasks]]\nid = "name"\ntitle = "name it"\nprompt = "Name it."\n'
    world, keys = agent_world(tmp_path, "asker", ASKING, tasks)
    go = world.start("go", "--goal", "ask", "--tasks", "tasks.toml", "--id", "r1", "--agent", "asker", "--key",
                     f"{keys}.key", "--json")
    served = None
    try:
        assert wait_until(lambda: world.json("inbox")["questions"], timeout=90)
        listing = world.run("status").stdout
        line = _run_line(listing, "r1")
        assert "waiting for you" in line and line.endswith("[needs you]"), listing
        (listed,) = world.json("status")["runs"]
        assert listed["outcome"]["state"] == "waiting-for-you" and listed["outcome"]["needs_you"] is True
        assert world.json("status", "r1")["outcome"]["needs_you"] is True
        assert "waiting for you" in world.run("watch", "r1", "--once").stdout.splitlines()[0]
        served = Served(world)
        _, _, runs = served.request("/")
        _, _, run = served.request("/runs/r1")
        assert '<tr data-run="r1" class="needs-you">' in runs and '<a class="needs-you" href="/inbox">' in runs
        assert '<span class="outcome waiting-for-you">waiting for you</span>' in run.split("</h1>")[0]
        (question,) = world.json("inbox")["questions"]
        assert world.run("answer", question["question_id"], "ada").returncode == 0
        out, err = go.communicate(timeout=180)
        assert go.returncode == 0, err
        assert json.loads(out)["run_outcome"]["state"] == "delivered"
        assert world.json("status", "r1")["outcome"]["needs_you"] is False
    finally:
        if served is not None:
            served.stop()
        if go.poll() is None:
            go.kill()
            go.communicate()
