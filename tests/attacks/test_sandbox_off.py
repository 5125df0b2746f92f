"""sandbox = "off": docket runs its agents unsandboxed only when docket.toml says so, and the run's summary warns."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world, unsandboxed

TASKS = '[[tasks]]\nid = "only"\ntitle = "t"\nprompt = "write a.py: X = 1"\n'


def test_a_run_with_the_sandbox_off_says_so_in_its_summary_and_records_it(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=TASKS)
    (world.repo / "docket.toml").write_text(unsandboxed((world.repo / "docket.toml").read_text()))
    git(world.repo, "commit", "-q", "-am", "off")

    done = world.run("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1")

    assert done.returncode == 0, done.stderr
    assert "docket: warning: unsandboxed: 1 worker generation(s) ran unsandboxed" in done.stderr
    assert "warning: 1 worker generation(s) ran unsandboxed" in done.stdout
    (launch,) = world.events("WorkerLaunchRequested")
    assert launch["payload"]["sandbox"]["enforced"] is False
    assert launch["payload"]["sandbox"]["write_roots"] == [] and launch["payload"]["sandbox"]["network"] == "any"


def test_a_sandboxed_run_does_not_warn(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=TASKS)
    done = world.run("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1")
    assert done.returncode == 0, done.stderr
    assert "unsandboxed" not in done.stderr + done.stdout
    assert "unsandboxed" not in world.run("watch", "r1", "--once").stdout + world.run("status", "r1").stdout


def test_status_marks_a_worker_that_ran_unsandboxed(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=TASKS)
    (world.repo / "docket.toml").write_text(unsandboxed((world.repo / "docket.toml").read_text()))
    git(world.repo, "commit", "-q", "-am", "off")
    assert world.run("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1").returncode == 0
    status = world.run("status", "r1")
    assert status.returncode == 0, status.stderr
    assert "[unsandboxed]" in status.stdout
    (worker,) = [w for w in world.json("status", "r1")["workers"] if w["worker_id"] == "r1.only"]
    assert worker["sandbox"] == "off"
    (task,) = world.json("watch", "r1", "--once")["tasks"]  # the board, as watch shows it
    assert task["unsandboxed"] is True
    assert "[unsandboxed]" in world.run("watch", "r1", "--once").stdout
