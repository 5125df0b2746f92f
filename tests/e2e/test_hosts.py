"""Host ids (DOCKET_HOST): every process identity names the host that started it, and a supervisor never looks at,
stops or ends what another host started; two ids on one machine are two hosts to each other."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil

from tests.e2e.go_world import GoWorld, make_go_world, wait_until
from tests.processes import alive

HANG = '[[tasks]]\nid = "slow"\ntitle = "slow"\nprompt = """hang\n"""\n'


def _killed_mid_run(tmp_path: Path) -> tuple[GoWorld, dict]:
    """A run whose `docket go` on host alpha was SIGKILLed while its agent works: the agent lives on."""
    world = make_go_world(tmp_path, tasks=HANG, idle_timeout="10m")
    world.env["DOCKET_HOST"] = "alpha"
    going = world.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--json")
    try:
        assert wait_until(lambda: world.events("WorkerLaunched"), timeout=60)
    finally:
        going.send_signal(signal.SIGKILL)
        going.communicate(timeout=60)
    (launched,) = world.events("WorkerLaunched")
    return world, launched["payload"]["process"]


def test_every_process_identity_names_the_host_that_started_it(tmp_path):
    world, agent = _killed_mid_run(tmp_path)
    try:
        assert agent["host"] == "alpha"
        assert {e["payload"]["supervisor"]["host"] for e in world.events("RunSupervised")} == {"alpha"}
        assert psutil.Process(agent["pid"]).environ()["DOCKET_HOST"] == "alpha"  # the mark another host respects
    finally:
        world.env["DOCKET_HOST"] = "alpha"
        world.run("reconcile", "--apply")


def test_another_host_leaves_a_hosts_processes_workers_and_supervisions_alone(tmp_path):
    """beta cannot look at alpha's processes: its reconcile finds nothing to do, not a dead worker, not an orphan
    to kill, not a gone supervisor, though alpha's docket is gone; alpha's own reconcile then stops its agent."""
    world, agent = _killed_mid_run(tmp_path)
    world.env["DOCKET_HOST"] = "beta"
    beta = world.run("reconcile", "--apply", "--json")
    assert beta.returncode == 0, beta.stderr
    assert json.loads(beta.stdout)["findings"] == []
    time.sleep(0.5)
    assert alive(agent["pid"]) and world.events("WorkerExited") == []

    world.env["DOCKET_HOST"] = "alpha"
    alpha = world.run("reconcile", "--apply", "--json")
    kinds = sorted({f["kind"] for f in json.loads(alpha.stdout)["findings"]})
    assert kinds == ["supervisor-gone", "unsupervised"], alpha.stdout
    assert wait_until(lambda: not alive(agent["pid"]), timeout=30)
    assert [e["payload"]["cause"] for e in world.events("WorkerExited")] == ["stopped"]


def test_a_host_id_that_is_not_one_is_refused_before_anything_is_recorded(tmp_path):
    world = make_go_world(tmp_path, tasks=HANG)
    before = world.json("log")["events"]
    for bad in ("two words", "", "-dash", "a/b", "x" * 129, "\x1b]0;title\x07"):
        world.env["DOCKET_HOST"] = bad
        refused = world.run("run", "open", "--goal", "g", "--target", "main", "--id", "r1")
        assert refused.returncode == 2 and refused.stderr.startswith("docket: error: bad-host: "), (bad, refused)
        assert "\x1b" not in refused.stderr
    del world.env["DOCKET_HOST"]
    assert world.json("log")["events"] == before


def test_a_task_whose_worktree_is_another_hosts_is_not_launched_here(tmp_path):
    """alpha's generation ran in a worktree on alpha: beta may not launch the task's next generation into it (its
    files, and any work not pinned, are on alpha). Refused worktree-elsewhere, nothing recorded."""
    world, agent = _killed_mid_run(tmp_path)
    world.env["DOCKET_HOST"] = "alpha"
    assert world.run("reconcile", "--apply").returncode == 0  # alpha stops its own unsupervised agent
    assert wait_until(lambda: not alive(agent["pid"]), timeout=30)
    before = world.json("log")["events"]
    world.env["DOCKET_HOST"] = "beta"
    refused = world.run("worker", "launch", "r1", "--task", "r1.slow", "--id", "r1.slow")
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.startswith("docket: error: worktree-elsewhere: task r1.slow's worktree is on host alpha")
    assert world.json("log")["events"] == before
