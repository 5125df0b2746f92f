"""What `docket go` promises about how much runs and what judges: --parallel N agents at once at most (and N
reached), and a check with required = false never decides a candidate's fate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .go_world import make_go_world

# An agent that counts the agents alive at once in a file shared by all of them (under a lock), and waits until
# N of them are (or every task has started) plus a grace, so that a bound that lets more run is seen doing so.
COUNTED_AGENT = '''\
import fcntl, json, os, sys, time
from pathlib import Path

shared, bound, total, grace = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])

def update(change):
    with open(shared / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state_file = shared / "state.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else {"alive": 0, "max": 0, "started": 0}
        change(state)
        state["max"] = max(state["max"], state["alive"])
        state_file.write_text(json.dumps(state))
        return dict(state)

def start(state):
    state["alive"] += 1
    state["started"] += 1

def end(state):
    state["alive"] -= 1

update(start)
deadline = time.monotonic() + 30  # a guard only: the test fails if the bound was never reached
while time.monotonic() < deadline:
    state = update(lambda s: None)
    if state["alive"] >= bound or state["started"] >= total:
        break
    time.sleep(0.05)
time.sleep(grace)  # time for an agent beyond the bound to start, were one allowed to
Path(os.environ["DOCKET_TASK"].replace(".", "_") + ".py").write_text("X = 1\\n")
update(end)
'''

TASKS = "".join(f'[[tasks]]\nid = "t{n}"\ntitle = "task {n}"\nprompt = "count me"\n\n' for n in range(1, 6))


def test_parallel_n_runs_at_most_n_agents_at_once_and_does_run_n(tmp_path: Path):
    shared = tmp_path / "counter"
    shared.mkdir()
    script = tmp_path / "counted_agent.py"
    script.write_text(COUNTED_AGENT)
    agent = (f'\n[agents.counted]\ncommand = {json.dumps([sys.executable, str(script), str(shared), "2", "5", "2"])}\n'
             f'prompt = "stdin"\nidle_timeout = "5m"\nwrite = ["{shared}"]\n')  # its sandbox lets it count there
    world = make_go_world(tmp_path, target="trunk", tasks=TASKS, extra_config=agent)

    done = world.go("r1", "--target", "trunk", "--agent", "counted", "--parallel", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads((shared / "state.json").read_text())
    assert (state["started"], state["alive"]) == (5, 0)
    assert state["max"] == 2, state  # never more than --parallel, and that many did run together
    assert {t["result"] for t in json.loads(done.stdout)["tasks"]} == {"delivered"}


def test_a_check_that_is_not_required_does_not_judge_a_candidate_under_go(tmp_path: Path):
    optional = '\n[checks.optional]\ncommand = ["sh", "-c", "echo not a verdict; exit 1"]\nrequired = false\n'
    world = make_go_world(tmp_path, target="trunk", extra_config=optional)

    done = world.go("r1", "--target", "trunk", "--cycles", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "delivered"
    assert {t["task"]: t["result"] for t in summary["tasks"]} == {"greet": "delivered", "name": "delivered",
                                                                   "shout": "delivered"}
    assert all(t["checks"].get("optional") in (None, "failed") and t["checks"]["compiles"] == "passed"
               for t in summary["tasks"]), summary["tasks"]
    assert [t["cycles"] for t in summary["tasks"]] == [1, 2, 1]  # only the required check sent name back
    assert world.tree_of("trunk") != world.tree_of("main")
    for path, text in {"greet.py": 'print("hello")\nprint("HELLO")\n', "name.py": 'NAME = "docket"\n'}.items():
        assert world.file_at("trunk", path) == text
