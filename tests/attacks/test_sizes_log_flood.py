"""Attack: an agent floods its output (300 MB) to fill the disk with its log.

The log is capped at the agent's max_log while the agent runs: its first half and its last part are kept, a line
says how many bytes were cut between, WorkerExited records the count, and the work the agent did still delivers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.attacks.attacker_world import honest_and, task
from tests.conftest import git
from tests.e2e.go_world import AGENT, make_go_world

TASKS = honest_and(task("flood", "flood the log", "Flood.", "write mine.py: MINE = 1", "FLOOD"))

FLOODER = '''\
import subprocess, sys
prompt = open(sys.argv[1]).read()
print("FIRST LINE of the flooding agent", flush=True)
if "FLOOD" in prompt:  # 300 MB, or "FLOOD <bytes>"
    size = prompt.split("FLOOD", 1)[1].split()[0] if prompt.split("FLOOD", 1)[1].split() else ""
    subprocess.run(f"yes | head -c {size if size.isdigit() else 300000000}", shell=True, check=True)
done = subprocess.run([sys.executable, sys.argv[2], "--prompt-file", sys.argv[1]])
print("LAST LINE of the flooding agent", flush=True)
sys.exit(done.returncode)
'''

CAP = 1_000_000


def test_a_flooded_log_is_capped_head_and_tail_kept_the_cut_recorded_and_the_work_delivers(tmp_path: Path):
    flooder = tmp_path / "flooder.py"
    flooder.write_text(FLOODER)
    agent = f'''
[agents.flooder]
command = ["{sys.executable}", "{flooder}", "{{prompt_file}}", "{AGENT}"]
prompt = "file"
max_log = "1MB"
'''
    world = make_go_world(tmp_path, tasks=TASKS, extra_config=agent)
    (world.repo / "docket.toml").write_text((world.repo / "docket.toml").read_text()
                                            .replace('agent = "scripted"', 'agent = "flooder"'))
    git(world.repo, "commit", "-qm", "the flooding agent", "-a")

    done = world.go("r1", "--parallel", "2")
    assert done.returncode == 0, done.stderr
    rows = {row["task"]: row["result"] for row in json.loads(done.stdout)["tasks"]}
    assert rows == {"greet": "delivered", "flood": "delivered"}
    assert world.file_at("main", "mine.py") == "MINE = 1\n"

    logs = {e["payload"]["worker_id"]: Path(e["payload"]["log_path"]) for e in world.events("WorkerLaunchRequested")}
    exits = {e["payload"]["worker_id"]: e["payload"] for e in world.events("WorkerExited")}
    flood_log = logs["r1.flood"].read_bytes()
    assert len(flood_log) <= CAP + 200
    assert flood_log.startswith(b"FIRST LINE of the flooding agent\ny\ny\n")
    assert flood_log.rstrip().endswith(b"LAST LINE of the flooding agent")
    cut = exits["r1.flood"]["log_cut_bytes"]
    assert cut > 290_000_000 and f"[docket: {cut} bytes of output cut here".encode() in flood_log
    assert exits["r1.flood"]["log_bytes"] == len(flood_log)
    assert exits["r1.greet"]["log_cut_bytes"] == 0 and b"bytes of output cut" not in logs["r1.greet"].read_bytes()
    assert world.run("verify").returncode == 0


def test_the_log_is_capped_while_the_agent_still_runs_also_when_its_flood_ends_just_over_the_cap(tmp_path: Path):
    from tests.e2e.go_world import wait_until

    flooder = tmp_path / "flooder.py"
    flooder.write_text(FLOODER)
    agent = f'''
[agents.flooder]
command = ["{sys.executable}", "{flooder}", "{{prompt_file}}", "{AGENT}"]
prompt = "file"
max_log = "1MB"
'''
    # a flood that ends a little over the cap, under the slack a flood is cut at: only the cut of a quiet log over
    # its cap brings it under while the agent waits (for go-on.txt, made in its workspace by this test)
    tasks = TASKS.replace("FLOOD\n", f"FLOOD {CAP + CAP // 8}\nwait for go-on.txt\n")
    world = make_go_world(tmp_path, tasks=tasks, extra_config=agent)
    (world.repo / "docket.toml").write_text((world.repo / "docket.toml").read_text()
                                            .replace('agent = "scripted"', 'agent = "flooder"'))
    git(world.repo, "commit", "-qm", "the flooding agent", "-a")
    process = world.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--json")
    try:
        def flood_log() -> Path | None:
            found = [Path(e["payload"]["log_path"]) for e in world.events("WorkerLaunchRequested")
                     if e["payload"]["worker_id"] == "r1.flood"]
            return found[0] if found and found[0].exists() else None

        def capped() -> bool:
            log = flood_log()
            return log is not None and log.stat().st_size <= CAP + 200 and b"bytes of output cut here" in \
                log.read_bytes()

        assert wait_until(capped, 120)
        # the agent is still running (it waits for go-on), and its log is already capped
        assert not [e for e in world.events("WorkerExited") if e["payload"]["worker_id"] == "r1.flood"]
    finally:
        for e in world.events("WorktreeRequested"):
            if e["payload"]["task_id"] == "r1.flood":
                (Path(e["payload"]["path"]) / "go-on.txt").write_text("")
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    assert {row["task"]: row["result"] for row in json.loads(out)["tasks"]} == {"greet": "delivered",
                                                                                "flood": "delivered"}
