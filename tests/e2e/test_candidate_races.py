"""Races between docket processes on one candidate: attempts never share a number or an execution; one pin.

Several real `docket` processes are started at once, many rounds; the
assertions hold whatever order the two cores run them in.
"""

from __future__ import annotations

from docket.adapters.world.files.paths import executions_root, task_worktree_path
import subprocess
import sys

from ..conftest import git

RUN, TASK = "r1", "t1"


def start(docket, *args: str) -> subprocess.Popen[str]:  # noqa: ANN001
    return subprocess.Popen([sys.executable, "-m", "docket", *args], cwd=docket.cwd, env=docket.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def events(docket, type_name: str) -> list[dict]:  # noqa: ANN001
    return [e["payload"] for e in docket("log", "--json", "--type", type_name).json()["events"]]


def test_concurrent_runs_of_one_check_get_their_own_attempts_and_executions(docket):
    (docket.cwd / "docket.toml").write_text('[checks.slow]\ncommand = ["sh", "-c", "sleep 0.3"]\n')
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)
    binding = docket("worker", "launch", RUN, "--task", TASK, "--json", "--", "sh", "-c",
                     "echo x > x.txt").json()["pin"]["candidate"]["binding_id"]
    for _ in range(3):
        procs = [start(docket, "check", "run", binding, "--json") for _ in range(3)]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    requested = events(docket, "CheckRequested.v1")
    assert sorted(r["attempt"] for r in requested) == list(range(1, 10))
    assert len({r["execution"] for r in requested}) == 9
    assert len(events(docket, "CheckPassed.v1")) == 9 and len(events(docket, "ExecutionRemoved.v1")) == 9
    listing = git(docket.cwd, "worktree", "list", "--porcelain")
    assert "executions" not in listing
    assert not (executions_root(docket.cwd / ".git") / RUN).exists()


def test_concurrent_pins_of_one_worktree_make_one_candidate(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)
    docket("worker", "launch", RUN, "--task", TASK, "--", "true")
    worktree = task_worktree_path(docket.cwd / ".git", RUN, TASK)
    for round_ in range(3):
        (worktree / f"round-{round_}.txt").write_text(f"{round_}\n")
        procs = [start(docket, "candidate", "pin", RUN, "--task", TASK, "--json") for _ in range(3)]
        bindings = set()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            bindings.add(__import__("json").loads(out)["binding_id"])
        assert len(bindings) == 1
    assert len(events(docket, "CandidatePinRequested.v1")) == 3
    assert len(events(docket, "CandidatePinned.v1")) == 3
    refs = git(docket.cwd, "for-each-ref", "--format=%(refname)", "refs/docket/candidates/").splitlines()
    assert len(refs) == 3
