"""`docket go --checks N` (issue 37, item 3): the run's checks, its tasks' and its merge queue's together, have at
most N processes at once, counted apart from the agents (--parallel); a check waiting for a slot is stopped and
recorded like a running one when go is interrupted."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from tests.e2e.go_world import docket_processes, make_go_world, wait_until

GUARD = 60  # a failure guard, never a measure of speed

# A check that notes when it starts and ends (CLOCK_MONOTONIC is one clock for every process of the machine) in a
# file shared by all of them, outside the repository. With peers > 1 the first ones wait (within a guard) until that
# many checks have started, so that a pool that lets them run together is seen doing so; then each sleeps a second.
TIMED_CHECK = '''\
import fcntl, os, sys, time
from pathlib import Path

shared, peers = Path(sys.argv[1]), int(sys.argv[2])
log = shared / "intervals.log"

def note(word):
    with open(log, "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(f"{word} {os.getpid()} {time.monotonic()}\\n")

def started():
    return sum(line.startswith("start ") for line in log.read_text().splitlines())

note("start")
guard = time.monotonic() + 30
while started() < peers and time.monotonic() < guard:
    time.sleep(0.05)
time.sleep(1)
Path("junit.xml").write_text('<testsuite tests="1"><testcase classname="t" name="ok"/></testsuite>')
note("end")
'''

TASKS = "".join(f'[[tasks]]\nid = "{n}"\ntitle = "file {n}"\nprompt = "write {n}.py: {n.upper()} = 1"\n\n'
                for n in ("a", "b", "c"))


def timed_world(tmp_path: Path, peers: int, judge: str = "exit"):  # noqa: ANN201
    shared = tmp_path / "shared"
    shared.mkdir()
    script = shared / "timed_check.py"
    script.write_text(TIMED_CHECK)
    check = (f'\n[checks.timed]\ncommand = {json.dumps([sys.executable, str(script), str(shared), str(peers)])}\n'
             f'timeout = "5m"\nwrite = ["{shared}"]\njudge = "{judge}"\njunit = "junit.xml"\n')  # its sandbox lets it note its times there
    return make_go_world(tmp_path, target="trunk", tasks=TASKS, extra_config=check), shared / "intervals.log"


def intervals(log: Path) -> list[tuple[float, float]]:
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in log.read_text().splitlines():
        word, pid, at = line.split()
        (starts if word == "start" else ends)[pid] = float(at)
    assert set(starts) == set(ends), log.read_text()  # every check that started ended
    return sorted((starts[pid], ends[pid]) for pid in starts)


def overlapping(spans: list[tuple[float, float]]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    return [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if b[0] < a[1]]  # sorted by start


def test_checks_1_runs_the_checks_one_at_a_time(tmp_path: Path):
    world, log = timed_world(tmp_path, peers=1)

    done = world.go("r1", "--target", "trunk", "--checks", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {t["result"] for t in json.loads(done.stdout)["tasks"]} == {"delivered"}
    spans = intervals(log)
    assert len(spans) >= 3, spans  # each task's candidate, and the queue's verifications
    assert overlapping(spans) == [], spans  # never two at once


def test_checks_1_counts_the_bases_check_with_the_others(tmp_path: Path):
    """A check judged relative to the base runs on the base too: that run takes a slot like any other."""
    world, log = timed_world(tmp_path, peers=1, judge="relative-to-base")

    done = world.go("r1", "--target", "trunk", "--checks", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    checked = [e["payload"]["binding_id"] for e in world.events("CheckRequested")]
    pinned = {e["payload"]["binding_id"]: e["payload"]["boundary"] for e in world.events("CandidatePinRequested")}
    assert "base" in {pinned.get(b) for b in checked}, pinned  # the base's check ran, under the pool
    spans = intervals(log)
    assert len(spans) >= 4 and overlapping(spans) == [], spans


def test_checks_3_lets_checks_run_together(tmp_path: Path):
    world, log = timed_world(tmp_path, peers=2)

    done = world.go("r1", "--target", "trunk", "--checks", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {t["result"] for t in json.loads(done.stdout)["tasks"]} == {"delivered"}
    spans = intervals(log)
    assert overlapping(spans), spans  # two tasks' checks did run together


SLOW_CHECK = '''\
import os, sys, time
from pathlib import Path

Path(sys.argv[1], f"check-{os.getpid()}.pid").write_text(str(os.getpid()))
time.sleep(600)
'''


def test_ctrl_c_stops_a_running_check_and_records_one_waiting_for_its_slot_as_interrupted(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    script = shared / "slow_check.py"
    script.write_text(SLOW_CHECK)
    check = (f'\n[checks.slow]\ncommand = {json.dumps([sys.executable, str(script), str(shared)])}\n'
             f'timeout = "20m"\nwrite = ["{shared}"]\n')
    tasks = "".join(f'[[tasks]]\nid = "{n}"\ntitle = "file {n}"\nprompt = "write {n}.py: X = 1"\n\n' for n in "ab")
    world = make_go_world(tmp_path, target="trunk", tasks=tasks, extra_config=check)
    process = world.start("go", "--goal", "two files", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--checks", "1")

    def one_runs_one_waits() -> bool:
        requested = {e["payload"]["check_id"] for e in world.events("CheckRequested")}
        launched = {e["payload"]["check_id"] for e in world.events("CheckLaunched")}
        ended = {e["payload"]["check_id"] for t in ("CheckPassed", "CheckFailed") for e in world.events(t)}
        return len(list(shared.glob("check-*.pid"))) == 1 and bool(requested - launched - ended)

    try:
        assert wait_until(one_runs_one_waits, timeout=GUARD), world.all_events()[-5:]
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 7, out + err
    assert "Traceback" not in err, err
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
    launched = {e["payload"]["check_id"] for e in world.events("CheckLaunched")}
    failed = {e["payload"]["check_id"]: e["payload"] for e in world.events("CheckFailed")}
    assert {p["code"] for p in failed.values()} == {"interrupted"}, failed
    never_started = [p for check_id, p in failed.items() if check_id not in launched]
    assert len(never_started) == 1 and len(failed) == 2, failed  # the running one and the one waiting for its slot
    executions = {e["payload"]["check_id"] for e in world.events("ExecutionRemoved")}
    assert set(failed) <= executions, (failed, executions)  # neither leaves its execution behind
    assert not world.events("TaskFeedbackRecorded")  # neither says anything of its candidate
