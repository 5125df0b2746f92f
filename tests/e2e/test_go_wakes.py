"""docket go's threads wake each other when what one waits for happens, not at their next tick: here every tick and
every check poll is an hour long, and a run of two tasks (agent, check, the merge queue's step and its re-check,
the target moved) still ends, delivered. Before the wakes, the integrator slept its tick before it took the first
queued step, and the main loop slept its tick before it saw that step finish the task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.go import ONE_LINE_CONFIG, files, make_repository, tasks_file
from tests.conftest import git

HOUR = 3600.0
HOURLONG_TICKS = (
    "import sys\n"
    "from docket.adapters.service_layer.go import drive\n"
    "from docket.adapters.service_layer.use_cases import checks\n"
    f"drive.TICK_SECONDS = checks.POLL_SECONDS = {HOUR}\n"
    "from docket.cli.app import main\n"
    "sys.exit(main())\n")


def test_a_run_whose_ticks_are_an_hour_long_still_ends(tmp_path: Path):
    repo = make_repository(tmp_path / "repo", ONE_LINE_CONFIG, with_ledger=True)
    tasks = tasks_file(tmp_path / "tasks.toml", 2)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = [sys.executable, "-c", HOURLONG_TICKS, "go", "--goal", "wakes", "--tasks", str(tasks), "--target", "main",
            "--parallel", "1", "--id", "wakes", "--json"]
    try:
        done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:  # far below the hours the ticks would take: some wait was not woken
        raise AssertionError("docket go waited out a tick: a wake is missing") from None
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["status"]) == ("delivered", "completed")
    assert set(files(2)) <= set(git(repo, "ls-tree", "--name-only", "main").split())
