"""A live `docket go` steered from outside: budget, idle timeout, pause / resume / abort from another process,
two supervisors on one run, and hooks."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

from tests.e2e.go_world import docket_processes, kill, make_go_world, wait_until


def one_task(prompt: str) -> str:
    return f'[[tasks]]\nid = "only"\ntitle = "the only task"\nprompt = """{prompt}\n"""\n'


def launched(world, generation: int = 1) -> bool:  # noqa: ANN001
    return any(e["payload"]["generation"] == generation for e in world.events("WorkerLaunched"))


def test_a_run_whose_budget_runs_out_stops_its_agent_and_ends_budget_limited(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", idle_timeout="5m", tasks=one_task("hang"))
    done = world.go("r1", "--target", "trunk", "--budget", "3s")
    assert done.returncode == 7, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "budget-limited" and summary["outcome"] == "stopped"
    exhausted = world.events("RunBudgetExhausted")
    assert len(exhausted) == 1 and exhausted[0]["payload"]["used_ms"] >= 3000
    exits = world.events("WorkerExited")
    assert len(exits) == 1 and exits[0]["payload"]["cause"] in ("budget", "stopped")
    assert wait_until(lambda: docket_processes(world.ledger) == [])
    assert world.run("verify").returncode == 0


def test_time_while_no_supervisor_ran_is_not_billed(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("sleep: 2\nwrite a.py: X = 1"))
    process = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--budget", "10s", "--json")
    assert wait_until(lambda: launched(world))
    time.sleep(1)
    kill(process)
    time.sleep(11)  # longer than the whole budget, with no docket running
    done = world.go("r1", "--target", "trunk", "--budget", "10s")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    gone = [e for e in world.events("RunUnsupervised") if e["payload"]["cause"] == "supervisor-gone"]
    assert gone  # the killed supervisor's supervisions, ended at its last sign of life
    assert not world.events("RunBudgetExhausted")
    status = world.json("status", "r1")
    assert status["run"]["used_ms"] < 10_000


def test_an_agent_that_hangs_is_stopped_by_the_idle_timeout_and_retried_within_its_cycles(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", idle_timeout="2s",
                          tasks=one_task("first attempt: hang\nwrite a.py: X = 1"))
    done = world.go("r1", "--target", "trunk", "--cycles", "2")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["tasks"][0]
    assert (row["result"], row["cycles"]) == ("delivered", 2)
    feedback = world.events("TaskFeedbackRecorded")
    assert [(f["payload"]["generation"], f["payload"]["code"]) for f in feedback] == [(1, "agent-idle-timeout")]
    assert world.events("WorkerExited")[0]["payload"]["cause"] == "idle-timeout"
    assert world.file_at("trunk", "a.py") == "X = 1\n"


def test_pause_resume_and_abort_from_another_process_act_on_a_live_go(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("sleep: 60\nwrite a.py: X = 1"))
    process = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk", "--json")
    try:
        assert wait_until(lambda: launched(world))
        assert world.run("run", "pause", "r1", "--reason", "lunch").returncode == 0
        # the supervising process stops the agent (not judged: no cycle spent) and waits
        assert wait_until(lambda: world.events("WorkerExited"), timeout=10)
        assert [e["payload"]["reason"] for e in world.events("WorkerStopRequested")] == ["run-stopped"]
        assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
        time.sleep(1.5)
        assert process.poll() is None and not launched(world, 2)
        assert world.run("run", "resume", "r1").returncode == 0
        assert wait_until(lambda: launched(world, 2), timeout=10)  # carried on by the next generation
        assert not world.events("TaskFeedbackRecorded")
        assert world.run("run", "abort", "r1", "--reason", "enough").returncode == 0
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            kill(process)
    assert process.returncode == 7, err
    assert json.loads(out)["status"] == "aborted"
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
    assert world.run("verify").returncode == 0


def test_a_second_supervisor_stands_by_and_takes_over_when_the_first_is_killed(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("sleep: 3\nwrite a.py: X = 1"))
    first = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk", "--json")
    assert wait_until(lambda: launched(world))
    second = world.start("go", "--resume", "r1", "--json")
    lines: list[str] = []
    standing = threading.Event()

    def read_stderr() -> None:  # the second's stderr as it comes (was: a 2 s sleep, shorter than its start-up
        for line in second.stderr:  # at load 12, so it took over after the kill without ever standing by)
            lines.append(line)
            if "standing by" in line:
                standing.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert standing.wait(120), "".join(lines)
        assert second.poll() is None  # standing by: the first holds the run's live driver lease
        assert len(world.events("WorkerLaunched")) == 1
        kill(first)
        watchdog = threading.Timer(120, second.kill)  # a second that never ends fails the test, never hangs it
        watchdog.start()
        out = second.stdout.read()
        watchdog.cancel()
        second.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        for p in (first, second):
            if p.poll() is None:
                kill(p)
    err = "".join(lines)
    assert second.returncode == 0, err
    assert json.loads(out)["outcome"] == "delivered"
    grants = [e["payload"] for e in world.events("LeaseGranted") if e["payload"]["resource"] == "driver/r1"]
    assert len(grants) == 2 and grants[1]["supersedes_token"] is not None
    assert len(world.events("ReceiptSealed")) == 1
    assert world.file_at("trunk", "a.py") == "X = 1\n"


def test_a_second_supervisor_of_a_live_run_leaves_the_work_to_the_first(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("sleep: 2\nwrite a.py: X = 1"))
    first = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk", "--json")
    assert wait_until(lambda: launched(world))
    second = world.start("go", "--resume", "r1", "--json")
    out1, err1 = first.communicate(timeout=60)
    out2, err2 = second.communicate(timeout=60)
    assert (first.returncode, second.returncode) == (0, 0), err1 + err2
    assert json.loads(out2)["outcome"] == "delivered"
    assert len(world.events("WorkerLaunched")) == 1 and len(world.events("ReceiptSealed")) == 1


def test_hooks_fire_once_per_event_and_a_failing_hook_does_not_stop_the_run(tmp_path: Path):
    log = tmp_path / "hooks.log"
    hooks = f'''
[hooks]
task-finished = {{ command = ["sh", "-c", "cat >> {log}; echo >> {log}"], write = ["{tmp_path}"] }}
run-finished = {{ command = ["sh", "-c", "echo run-finished \\"$DOCKET_EVENT\\" >> {log}"], write = ["{tmp_path}"] }}
check-failed = ["sh", "-c", "exit 3"]
'''
    world = make_go_world(tmp_path, target="trunk", extra_config=hooks)
    done = world.go("r1", "--target", "trunk")
    assert done.returncode == 0, done.stderr
    lines = [line for line in log.read_text().splitlines() if line]
    finished = [json.loads(line) for line in lines if line.startswith("{")]
    assert sorted(e["payload"]["task_id"] for e in finished) == ["r1.greet", "r1.name", "r1.shout"]
    assert [line for line in lines if line.startswith("run-finished")] == ["run-finished RunCompleted.v1"]
    results = [e["payload"]["result"] for e in world.events("HookFinished")]
    assert results.count("failed") == 2  # the check that failed once, then the same check on the run's base: each hook exited 3
    assert results.count("succeeded") == 4


def test_ctrl_c_stops_the_agents_exits_7_and_the_run_goes_on_after_resume(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("sleep: 5\nwrite a.py: X = 1"))
    process = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target",
                          "trunk", "--json")
    assert wait_until(lambda: launched(world))
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 7, err
    summary = json.loads(out)
    assert summary["status"] == "active" and summary["outcome"] == "stopped"
    assert [e["payload"]["reason"] for e in world.events("WorkerStopRequested")] == ["supervisor-gone"]
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
    (world.repo / "tasks.toml").write_text(one_task("write a.py: X = 2"))  # what a resume reads is the ledger's
    done = world.go("r1", "--target", "trunk")
    assert done.returncode == 0, done.stderr
    assert world.file_at("trunk", "a.py") == "X = 1\n"
    assert not world.events("TaskFeedbackRecorded")  # the stopped generation was not judged


def test_the_usual_case_a_clean_checkout_of_the_target_is_moved_with_it(tmp_path: Path):
    from tests.conftest import git
    from tests.e2e.go_world import DELIVERED

    world = make_go_world(tmp_path)  # target main, checked out in the repository itself
    done = world.go("r1", "--target", "main")
    assert done.returncode == 0, done.stderr
    assert git(world.repo, "status", "--porcelain") == ""
    for path, text in DELIVERED.items():
        assert (world.repo / path).read_text() == text
    assert git(world.repo, "rev-parse", "HEAD") == json.loads(done.stdout)["target_commit"]


def test_a_dirty_checkout_of_the_target_is_left_alone_and_the_run_waits_for_it(tmp_path: Path):
    world = make_go_world(tmp_path)
    (world.repo / "README.md").write_text("my own edit\n")
    done = world.go("r1", "--target", "main")
    assert done.returncode == 8, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["status"]) == ("waiting", "active")  # not failed: it can still deliver
    assert "unstaged README.md" in summary["waiting"]["message"]
    assert (world.repo / "README.md").read_text() == "my own edit\n"
    assert not world.events("ReceiptSealed")
    from tests.conftest import git

    git(world.repo, "checkout", "--", "README.md")
    done = world.go("r1", "--target", "main")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "delivered"


def test_docket_supervise_finishes_a_run_whose_go_was_killed_and_once_only_recovers(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("sleep: 3\nwrite a.py: X = 1"))
    process = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target",
                          "trunk", "--json")
    assert wait_until(lambda: launched(world))
    kill(process)
    once = world.run("supervise", "--once", "--json")
    assert once.returncode == 0, once.stderr
    (recovered,) = json.loads(once.stdout)["runs"]
    assert recovered["run_id"] == "r1" and recovered["recovered"]  # the orphaned agent stopped, recorded
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=10)
    assert len(world.events("WorkerLaunched")) == 1  # --once launches nothing
    done = world.run("supervise", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == [{"run_id": "r1", "status": "completed"}]
    assert world.file_at("trunk", "a.py") == "X = 1\n"
    assert world.json("supervise")["runs"] == []  # nothing unfinished is left


def test_piped_docket_go_prints_plain_event_lines_then_its_summary(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=one_task("write a.py: X = 1\nsay: \\u001b]0;owned\\u0007"))
    done = world.run("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(" TaskFinished " in line for line in lines)
    assert lines[-3].startswith("run r1: delivered") and "\x1b" not in done.stdout and "\x07" not in done.stdout


def test_a_hook_whose_command_cannot_start_is_recorded_and_go_warns(tmp_path: Path):
    hooks = '\n[hooks]\nrun-finished = ["/no/such/notifier", "done"]\n'
    world = make_go_world(tmp_path, extra_config=hooks, tasks=one_task("write a.py: A = 1"))
    done = world.go("r1", "--target", "main")
    assert done.returncode == 0, done.stderr
    assert [e["payload"]["result"] for e in world.events("HookFinished")] == ["not-started"]
    warning = [line for line in done.stderr.splitlines() if "hook-not-started" in line]
    assert len(warning) == 1 and "run-finished" in warning[0], done.stderr


def test_a_signal_stops_the_merge_queue_at_its_next_step_and_a_resume_takes_it_on(tmp_path: Path):
    """Was: the integrator went on through every queued step (each re-checked) before docket go exited; with a
    thousand tasks' queue, a SIGTERM was not obeyed for minutes. The queue now stops at its next step."""
    tasks = "".join(f'[[tasks]]\nid = "t{i}"\ntitle = "file {i}"\nprompt = """write f{i}.py: X = {i}\n"""\n\n'
                    for i in range(1, 13))
    world = make_go_world(tmp_path, target="trunk", tasks=tasks,
                          extra_config='\n[checks.slow]\ncommand = ["sleep", "0.4"]\n')
    process = world.start("go", "--goal", "many", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                          "--parallel", "12", "--json")
    queued = lambda: len(world.events("IntegrationStepQueued"))  # noqa: E731

    def verified() -> int:  # steps verified, alone or in a batch (the queue batches what piles up)
        return (len(world.events("IntegrationStepVerified"))
                + sum(e["payload"]["last_step"] - e["payload"]["first_step"] + 1
                      for e in world.events("IntegrationBatchVerified")))

    assert wait_until(lambda: queued() >= 8 and verified(), timeout=120)
    verified_before = verified()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 7, err
    verified_after = verified()
    assert verified_after - verified_before <= 4  # the verdict under way (one batch at most) as the signal came
    assert verified_after < queued()  # the rest wait in the queue
    done = world.resume("r1", "--target", "trunk")
    assert done.returncode == 0, done.stderr
    assert verified() == 12
    assert all(world.file_at("trunk", f"f{i}.py") == f"X = {i}\n" for i in range(1, 13))
