"""Two `docket go` runs on one ledger: the second one's start (which converges what a crash left of *its* run)
leaves the first one's running agent alone. It once stopped every agent of the ledger its own run did not account
for: an agent of run A, launched and recorded, was killed at its gate or while it worked as soon as run B started,
and A's generation was spent on docket's doing (in the two-runs test, run A's `go` then ended quietly)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.e2e.go_world import make_go_world, wait_until

SLOW = '''\
[[tasks]]
id = "slow"
title = "slow"
prompt = """wait for go.flag
delete go.flag
write slow.py: SLOW = 1
"""
'''

QUICK = '''\
[[tasks]]
id = "quick"
title = "quick"
prompt = "write quick.py: QUICK = 1"
'''


def _agent_environment(world, worker_id: str) -> dict[str, str]:
    import psutil

    for process in psutil.process_iter(["pid"]):
        try:
            env = process.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if env.get("DOCKET_LEDGER") == str(world.ledger) and env.get("DOCKET_WORKER") == worker_id:
            return env
    raise AssertionError(f"no process of {worker_id}")


def test_a_second_run_starting_leaves_the_first_runs_running_agent_alone(tmp_path):
    """...and still stops a process that only claims to be that agent (its marks copied, in a group of its own)."""
    world = make_go_world(tmp_path, tasks=SLOW, idle_timeout="5m")
    (world.repo / "quick.toml").write_text(QUICK)
    forged = None
    a = world.start("go", "--goal", "slow", "--tasks", "tasks.toml", "--id", "ra", "--target", "main", "--json")
    try:
        log = world.repo / ".git" / "docket" / "logs" / "ra.slow" / "1.log"
        assert wait_until(lambda: log.exists() and b"waiting for" in log.read_bytes(), timeout=120)
        forged = subprocess.Popen(["sleep", "300"], env=_agent_environment(world, "ra.slow"),
                                  start_new_session=True)
        b = world.run("go", "--goal", "quick", "--tasks", "quick.toml", "--id", "rb", "--target", "main", "--json")
        assert b.returncode in (0, 6), b.stderr  # 6: its target move may meet A's
        assert log.exists() and b"waiting for" in log.read_bytes()
        assert forged.wait(timeout=30) == -signal.SIGTERM  # B's start stopped the impostor, and only it
        (worktrees := [e["payload"]["path"] for e in world.events("WorktreeCreated")
                       if e["payload"]["task_id"] == "ra.slow"])
        (Path(worktrees[0]) / "go.flag").write_text("go\n")
        out, err = a.communicate(timeout=180)
    finally:
        if forged is not None and forged.poll() is None:
            forged.kill()
            forged.wait()
        if a.poll() is None:
            a.kill()
            a.communicate()
    assert a.returncode == 0, (out, err)
    (row,) = json.loads(out)["tasks"]
    assert (row["result"], row["cycles"]) == ("delivered", 1), row
    exits = [e["payload"] for e in world.events("WorkerExited") if e["payload"]["worker_id"] == "ra.slow"]
    assert [(x["generation"], x["cause"], x["exit_code"]) for x in exits] == [(1, "exited", 0)]
    assert world.file_at("main", "slow.py") == "SLOW = 1\n"
