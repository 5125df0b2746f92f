"""Ctrl-C (SIGINT) or SIGTERM to a live `docket go` (issue 35, item 6): what runs is stopped at once (checks and
agents: their whole process groups, TERM then KILL), each stop is recorded, go exits 7 and says how to go on, and
`docket go --resume RUN` finishes the work without doing anything twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.go_world import agent_world, docket_processes, make_go_world, wait_until
from tests.processes import alive

GUARD = 60  # a failure guard, never a measure of speed


def one_task(prompt: str) -> str:
    return f'[[tasks]]\nid = "only"\ntitle = "the only task"\nprompt = """{prompt}\n"""\n'


def slow_check(tmp_path: Path, *, ignore_term: bool = False) -> str:
    """A required check that records its pid and a grandchild's, then sleeps for ten minutes, unless the file
    `fast` exists in tmp_path (a resume's check is quick). ignore_term: it shrugs off SIGTERM (only KILL ends it)."""
    trap = "trap '' TERM; " if ignore_term else ""
    script = (f"{trap}echo $$ > {tmp_path}/check.pid; sleep 600 & echo $! > {tmp_path}/grandchild.pid; "
              f"if [ -e {tmp_path}/fast ]; then kill $!; exit 0; fi; sleep 600")
    return f'\n[checks.slow]\ncommand = ["sh", "-c", {json.dumps(script)}]\ntimeout = "20m"\nwrite = ["{tmp_path}"]\n'


def pid_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def interrupted_once_started(process: subprocess.Popen[str], pid_files: tuple[Path, Path], what: str) -> tuple[int, int, str, str]:
    """Wait until both pid files name a process, send SIGINT, and collect the go: (the pids, stdout, stderr).
    A go still alive after the guard is killed so that the test fails rather than hangs."""
    try:
        assert wait_until(lambda: all(pid_in(f) for f in pid_files), timeout=GUARD), f"{what} never started"
        first, second = (pid_in(f) for f in pid_files)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert first is not None and second is not None
    return first, second, out, err


def no_traceback(text: str) -> bool:
    return "Traceback" not in text


def test_ctrl_c_during_a_check_stops_it_records_it_and_a_resume_checks_the_same_candidate_again(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("write a.py: X = 1"),
                          extra_config=slow_check(tmp_path))
    process = world.start("go", "--goal", "one file", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk")
    check, grandchild, out, err = interrupted_once_started(
        process, (tmp_path / "check.pid", tmp_path / "grandchild.pid"), "the check")
    assert process.returncode == 7, out + err
    assert no_traceback(out + err), err
    assert not alive(check) and not alive(grandchild)  # its whole group, not only the shell
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
    assert "docket go --resume r1" in err, err  # how to go on
    assert "candidate -" not in out and "no checks" not in out, out  # its candidate was pinned and checked
    (failed,) = world.events("CheckFailed")
    assert (failed["payload"]["check"], failed["payload"]["code"]) == ("slow", "interrupted"), failed
    assert "interrupted" in failed["payload"]["message"], failed
    assert not world.events("TaskFeedbackRecorded")  # a check docket stopped says nothing of the candidate
    binding = failed["payload"]["binding_id"]

    (tmp_path / "fast").touch()
    done = world.run("go", "--resume", "r1", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert world.file_at("trunk", "a.py") == "X = 1\n"
    assert len(world.events("WorkerLaunched")) == 1  # the agent was not run again
    assert [e["payload"]["binding_id"] for e in world.events("CandidatePinRequested")
            if e["payload"]["boundary"].startswith("generation-")] == [binding]  # nor its work pinned again
    again = [e["payload"] for e in world.events("CheckPassed") if e["payload"]["check"] == "slow"
             and e["payload"]["binding_id"] == binding]
    assert len(again) == 1  # the interrupted check ran again on the same candidate, once
    compiles = [e for e in world.events("CheckRequested") if e["payload"]["check"] == "compiles"
                and e["payload"]["binding_id"] == binding]
    assert len(compiles) == 1  # the check that had passed was not run twice
    assert not world.events("TaskFeedbackRecorded")


def test_a_second_ctrl_c_kills_at_once_what_shrugs_off_the_first(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("write a.py: X = 1"),
                          extra_config=slow_check(tmp_path, ignore_term=True))
    process = world.start("go", "--goal", "one file", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--json")
    err = Lines(process.stderr)
    try:
        assert wait_until(lambda: pid_in(tmp_path / "check.pid") and pid_in(tmp_path / "grandchild.pid"),
                          timeout=GUARD), "the check never started"
        check = pid_in(tmp_path / "check.pid")
        process.send_signal(signal.SIGINT)
        assert wait_until(lambda: "stopping" in err.text(), timeout=GUARD), err.text()
        process.send_signal(signal.SIGINT)
        out = process.stdout.read()
        process.wait(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    err.join()
    assert process.returncode == 7, err.text()
    assert no_traceback(out + err.text()), err.text()
    assert "killing" in err.text(), err.text()  # the second one was heard, and acted on
    assert not alive(check)
    summary = json.loads(out)  # stdout is still exactly one document
    assert summary["outcome"] == "stopped"
    assert "docket go --resume r1" in err.text(), err.text()


class Lines:
    """What a stream carries, read by a thread as it comes."""

    def __init__(self, stream) -> None:  # noqa: ANN001
        import threading

        self._lines: list[str] = []
        self._thread = threading.Thread(target=lambda: self._lines.extend(iter(stream.readline, "")), daemon=True)
        self._thread.start()

    def text(self) -> str:
        return "".join(list(self._lines))

    def join(self) -> None:
        self._thread.join(timeout=GUARD)


SLEEPY_AGENT = '''\
import os, pathlib, subprocess, sys, time
here = pathlib.Path(sys.argv[1])
(here / "agent.pid").write_text(str(os.getpid()))
child = subprocess.Popen(["sleep", "600"])
(here / "agent-grandchild.pid").write_text(str(child.pid))
if not (here / "fast").exists():
    time.sleep(600)
child.kill()
pathlib.Path("a.py").write_text("X = 1\\n")
'''


def test_ctrl_c_while_an_agent_works_stops_its_group_records_it_and_a_resume_relaunches_it(tmp_path: Path):
    script = tmp_path / "sleepy_agent.py"
    script.write_text(SLEEPY_AGENT)
    agent = (f'\n[agents.sleepy]\ncommand = {json.dumps([sys.executable, str(script), str(tmp_path)])}\n'
             f'prompt = "stdin"\nidle_timeout = "20m"\nwrite = ["{tmp_path}"]\n')  # its sandbox lets it write pids
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("make a.py"), extra_config=agent)
    process = world.start("go", "--goal", "one file", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--agent", "sleepy")
    agent_pid, grandchild, out, err = interrupted_once_started(
        process, (tmp_path / "agent.pid", tmp_path / "agent-grandchild.pid"), "the agent")
    assert process.returncode == 7, out + err
    assert no_traceback(out + err), err
    assert not alive(agent_pid) and not alive(grandchild)
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
    assert "docket go --resume r1" in err, err
    assert [e["payload"]["reason"] for e in world.events("WorkerStopRequested")] == ["supervisor-gone"]
    (exited,) = world.events("WorkerExited")
    assert exited["payload"]["cause"] == "stopped", exited
    assert not world.events("TaskFeedbackRecorded") and not world.events("CandidatePinRequested")  # not judged

    (tmp_path / "fast").touch()
    done = world.run("go", "--resume", "r1", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert world.file_at("trunk", "a.py") == "X = 1\n"
    assert [e["payload"]["generation"] for e in world.events("WorkerLaunched")] == [1, 2]  # the stopped one again
    assert not world.events("TaskFeedbackRecorded")  # no cycle spent on the generation docket stopped


def test_ctrl_c_during_the_merge_queues_check_leaves_the_step_queued_and_a_resume_verifies_it(tmp_path: Path):
    """The issue's case: the task's candidate was pinned, checked and handed off; the queue's check of it merged
    onto the target ran when Ctrl-C came. It is stopped, the step is neither rejected nor sent back to its agent,
    the summary still names the candidate and its checks, and the resume verifies and delivers it."""
    once = tmp_path / "checked-once"
    script = (f"if [ ! -e {once} ]; then touch {once}; exit 0; fi; "  # the task's own check passes at once
              f"echo $$ > {tmp_path}/check.pid; sleep 600 & echo $! > {tmp_path}/grandchild.pid; "
              f"if [ -e {tmp_path}/fast ]; then kill $!; exit 0; fi; sleep 600")
    config = f'\n[checks.slow]\ncommand = ["sh", "-c", {json.dumps(script)}]\ntimeout = "20m"\nwrite = ["{tmp_path}"]\n'
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("write a.py: X = 1"), extra_config=config)
    process = world.start("go", "--goal", "one file", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--json")
    check, grandchild, out, err = interrupted_once_started(
        process, (tmp_path / "check.pid", tmp_path / "grandchild.pid"), "the queue's check")
    assert process.returncode == 7, err
    assert no_traceback(out + err), err
    assert not alive(check) and not alive(grandchild)
    assert "docket go --resume r1" in err, err
    (failed,) = world.events("CheckFailed")
    assert (failed["payload"]["check"], failed["payload"]["code"]) == ("slow", "interrupted"), failed
    queue_pins = [e["payload"]["binding_id"] for e in world.events("CandidatePinRequested")
                  if e["payload"]["boundary"].startswith("integration-")]
    assert failed["payload"]["binding_id"] in queue_pins  # it was the queue's check
    assert not world.events("IntegrationStepRejected") and not world.events("TaskFeedbackRecorded")
    (row,) = json.loads(out)["tasks"]
    assert row["candidate"] and row["checks"] == {"compiles": "passed", "slow": "passed"}, row  # its own checks

    (tmp_path / "fast").touch()
    done = world.run("go", "--resume", "r1", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert world.file_at("trunk", "a.py") == "X = 1\n"
    assert len(world.events("WorkerLaunched")) == 1 and len(world.events("IntegrationStepQueued")) == 1
    assert len(world.events("IntegrationStepVerified")) == 1
    assert not world.events("TaskFeedbackRecorded")
