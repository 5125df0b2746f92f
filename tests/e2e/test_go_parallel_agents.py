"""`docket go --parallel N` counts agents only (issue 37, item 3): a task whose agent has ended holds none of the N
places while its generation is judged (pinned, checked, handed off), so the next task's agent starts while those
checks run; yet no more than N agents ever run at once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.e2e.go_world import make_go_world

# The agent and the check note when they start and end (CLOCK_MONOTONIC is one clock for every process of the
# machine) in a file shared by all of them, outside the repository: "agent" or "check", start or end, the process,
# the task (and, for a check, its candidate). The agent is quick. The check waits (within a guard) until an agent
# starts after it did, or every task's agent has started, then takes a second and a half: with --parallel counting
# a task in its checks, no agent could start meanwhile, and each check would wait out its guard.
NOTE = '''\
import fcntl, os, sys, time
from pathlib import Path

log = Path(sys.argv[1]) / "intervals.log"

def note(kind, word):
    with open(log, "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        at = time.monotonic()
        out.write(f"{kind} {word} {os.getpid()} {at} {os.environ.get('DOCKET_TASK', '-')} "
                  f"{os.environ.get('DOCKET_CANDIDATE', '-')}\\n")
        return at
'''

# argv: the shared folder, how long it works, the task whose first attempt is broken (the compiles check fails it)
QUICK_AGENT = NOTE + '''
note("agent", "start")
task, tried = os.environ["DOCKET_TASK"], Path(sys.argv[1]) / "tried"
broken = task.endswith("." + sys.argv[3]) and not tried.exists()
Path(task.replace(".", "_") + ".py").write_text("X = broken\\n" if broken else "X = 1\\n")
tried.touch()
time.sleep(float(sys.argv[2]))
note("agent", "end")
'''

SLOW_CHECK = NOTE + '''
started = note("check", "start")
guard = time.monotonic() + 10
while time.monotonic() < guard:
    agents = [float(line.split()[3]) for line in log.read_text().splitlines() if line.startswith("agent start ")]
    if len(agents) >= int(sys.argv[2]) or max(agents, default=0) > started:
        break
    time.sleep(0.05)
time.sleep(1.5)
note("check", "end")
'''

TASKS = "".join(f'[[tasks]]\nid = "{n}"\ntitle = "file {n}"\nprompt = "write a file"\n\n' for n in ("a", "b", "c"))

Span = tuple[float, float, str, str]  # start, end, task, candidate


def spans(log: Path, kind: str) -> list[Span]:
    starts: dict[str, tuple[float, str, str]] = {}
    ends: dict[str, float] = {}
    for line in log.read_text().splitlines():
        what, word, pid, at, task, candidate = line.split()
        if what == kind:
            if word == "start":
                starts[pid] = (float(at), task, candidate)
            else:
                ends[pid] = float(at)
    assert set(starts) == set(ends), log.read_text()  # every one that started ended
    return sorted((starts[pid][0], ends[pid], starts[pid][1], starts[pid][2]) for pid in starts)


def timed_world(tmp_path: Path, *, works: float, broken_first: str = "-"):  # noqa: ANN201
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "agent.py").write_text(QUICK_AGENT)
    (shared / "check.py").write_text(SLOW_CHECK)
    agent = [sys.executable, str(shared / "agent.py"), str(shared), str(works), broken_first]
    config = (f'\n[agents.quick]\ncommand = {json.dumps(agent)}\n'
              f'prompt = "stdin"\nidle_timeout = "5m"\nwrite = ["{shared}"]\n'  # its sandbox lets it note there
              f'\n[checks.slow]\ncommand = {json.dumps([sys.executable, str(shared / "check.py"), str(shared), "3"])}\n'
              f'timeout = "5m"\nwrite = ["{shared}"]\n')
    return make_go_world(tmp_path, target="trunk", tasks=TASKS, extra_config=config), shared / "intervals.log"


def overlapping(spans: list[Span]) -> list[tuple[Span, Span]]:
    return [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if b[0] < a[1]]  # sorted by start


def test_parallel_1_lets_the_next_agent_start_while_a_finished_agents_checks_run(tmp_path: Path):
    world, log = timed_world(tmp_path, works=0.3)

    done = world.go("r1", "--target", "trunk", "--agent", "quick", "--parallel", "1", "--checks", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {t["result"] for t in json.loads(done.stdout)["tasks"]} == {"delivered"}
    agents, checks = spans(log, "agent"), spans(log, "check")
    assert len(agents) == 3, log.read_text()
    assert overlapping(agents) == [], log.read_text()  # never two agents at once: --parallel 1
    # the candidates the tasks' generations made, judged by their checks and handed off (not the merge queue's)
    judged = {e["payload"]["binding_id"]: e["payload"]["task_id"] for e in world.events("HandoffOffered")}
    assert set(judged.values()) == {"r1.a", "r1.b", "r1.c"}, judged
    during = [(agent, check) for agent in agents for check in checks
              if judged.get(check[3], agent[2]) != agent[2] and check[0] < agent[0] < check[1]]
    assert during, log.read_text()  # an agent started while another task's candidate was being checked


def test_parallel_1_a_task_sent_back_takes_a_place_again_before_its_next_agent(tmp_path: Path):
    world, log = timed_world(tmp_path, works=1.0, broken_first="a")

    done = world.go("r1", "--target", "trunk", "--agent", "quick", "--parallel", "1", "--checks", "3",
                    "--cycles", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {t["result"] for t in json.loads(done.stdout)["tasks"]} == {"delivered"}
    (feedback,) = world.events("TaskFeedbackRecorded")
    assert feedback["payload"]["task_id"] == "r1.a", feedback
    agents = spans(log, "agent")
    assert sorted(agent[2] for agent in agents) == ["r1.a", "r1.a", "r1.b", "r1.c"], log.read_text()
    assert overlapping(agents) == [], log.read_text()  # its relaunch waited for a place: never two agents at once
