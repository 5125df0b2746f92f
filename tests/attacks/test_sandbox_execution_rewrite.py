"""The issue's attack on checks: an agent leaves a broken file and a detached daemon that writes the good file into
the check's execution while the check runs. The daemon does not outlive its generation, and could not write an
execution anyway: the check fails on the broken file, main never holds it, and an honest task still lands."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world
from tests.processes import alive

REWRITER = Path(__file__).with_name("rewriter.py")
TASKS = '''\
[[tasks]]
id = "evil"
title = "evil"
prompt = "evil"

[[tasks]]
id = "good"
title = "good"
prompt = "honest"
'''


def test_a_daemon_rewriting_a_check_execution_has_no_effect(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=TASKS)
    agent = f'[agents.rewriter]\ncommand = ["{sys.executable}", "{REWRITER}", "{{prompt_file}}"]\nprompt = "file"\n'
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "rewriter"')
    (world.repo / "docket.toml").write_text(config.replace("[checks.compiles]", agent + "\n[checks.compiles]"))
    git(world.repo, "commit", "-q", "-am", "the rewriter")

    done = world.run("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--cycles", "1", "--json")

    results = {row["task"]: row["result"] for row in __import__("json").loads(done.stdout)["tasks"]}
    assert results == {"evil": "failed", "good": "delivered"}, done.stdout
    assert world.file_at("main", "a.py") == "X = 1\n"
    assert git(world.repo, "ls-tree", "--name-only", "main", "b.py") == ""  # the broken file never reached main
    failed = [e["payload"] for e in world.events("CheckFailed")]
    assert failed and all(p["check"] == "compiles" for p in failed)
    (log,) = (world.repo / ".git" / "docket" / "workers").rglob("rewriter.log")
    pid, *attempts = log.read_text().splitlines()
    assert not [a for a in attempts if a.startswith("rewrote")]
    assert not alive(int(pid))
