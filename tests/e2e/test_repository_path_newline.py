"""A repository whose path holds a newline: git's alternates file names one path per line, so no workspace can
borrow its objects. docket go and worker launch refuse it before any work (exit 3, repository-path-unsupported),
rather than open a run whose every workspace reads as diverged; read-only commands still work there."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.go_world import make_go_world


def test_go_and_worker_launch_refuse_a_repository_whose_path_holds_a_newline(tmp_path: Path):
    world = make_go_world(tmp_path, name="two\nlines", target="trunk")
    done = world.run("go", "--goal", "one file", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk")
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.startswith("docket: error: repository-path-unsupported: "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr  # one line: the newline is escaped
    assert world.events("RunOpened") == []  # refused before any work
    assert world.run("run", "open", "--target", "trunk", "--goal", "by hand", "--id", "r2").returncode == 0
    assert world.run("task", "plan", "r2", "--title", "one", "--id", "t1").returncode == 0
    launched = world.run("worker", "launch", "r2", "--task", "t1", "--", "true")
    assert launched.returncode == 3, launched.stdout + launched.stderr
    assert launched.stderr.startswith("docket: error: repository-path-unsupported: "), launched.stderr
    assert world.events("WorktreeRequested") == [] and world.events("WorkerRegistered") == []
    assert world.run("status").returncode == 0
    assert world.run("verify").returncode == 0


def test_a_path_with_other_control_characters_still_runs(tmp_path: Path):
    world = make_go_world(tmp_path, name="tab\there", target="trunk",
                          tasks='[[tasks]]\nid = "only"\ntitle = "one"\nprompt = "write a.py: X = 1"\n')
    done = world.run("go", "--goal", "one file", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk")
    assert done.returncode == 0, done.stdout + done.stderr
