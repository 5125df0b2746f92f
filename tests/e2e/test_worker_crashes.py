"""Promise 2 for workers: docket SIGKILLed while it makes a worktree, launches or stops an agent, then converges.

Every case kills the real CLI (at a named crash point, DOCKET_FAULT, or at a
random instant), then runs `docket replay --apply` (when only intents are left
pending: the world to observe is git or a launch nobody can supervise) or
`docket reconcile --apply` (when the ledger may think a process runs: only
reconcile looks at the processes; it also ends the killed docket's
supervision of the run, so it always runs last), and checks what someone who left it
overnight would want to find: one worktree for the task, `git fsck --strict`
clean, no pending intent, no process of this ledger left, at most one process
per generation ever ran the agent, and none ran it for a generation whose
identity never reached the ledger. A new launch for the task then works.

The agent (tests/agents/marker_agent.sh) appends "<generation> <pid>" to a
marker file outside the worktree as its first instruction.
"""

from __future__ import annotations

from docket.adapters.world.files.paths import task_worktree_path
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.domain import worker as worker_aggregate

from ..conftest import campaign_rounds, git

AGENT = Path(__file__).resolve().parents[1] / "agents" / "marker_agent.sh"
RUN, TASK = "r1", "t1"
EFFECTOR_STEPS = ["before-observe", "after-observe", "before-act", "after-act", "after-outcome"]


def effector_points(intent_type: str) -> list[str]:
    return [f"effector:{step}@{intent_type}" for step in EFFECTOR_STEPS]


WORKTREE_POINTS = effector_points("WorktreeRequested.v2") + ["workspace:before-rename", "workspace:after-rename"]
LAUNCH_POINTS = [*effector_points("WorkerLaunchRequested.v1"), "launch:before-gate", "launch:after-gate",
                 "supervise:before-exit"]
STOP_POINTS = effector_points("WorkerStopRequested.v1")
WORKER_POINTS = WORKTREE_POINTS + LAUNCH_POINTS + STOP_POINTS  # test_crash.py checks every point is exercised

# For each crash point of `docket worker launch`: how it is recovered, and what generation 1 converges to.
# replay: only intents are pending (a worktree, or a launch whose held process exits by itself when its gate's
#   pipe closes); replay --apply observes them again (the launch is then recorded as failed, launcher-gone).
#   reconcile --apply follows, only to end the killed docket's supervision of the run.
# reconcile: the identity is in the ledger, so the ledger says "running"; only reconcile looks at the process.
LAUNCH_CASES = {
    # point: (recovery, worker status of generation 1 afterwards, exit cause, did the agent run)
    "effector:before-observe@WorktreeRequested.v2": ("replay", "registered", None, False),
    "effector:after-observe@WorktreeRequested.v2": ("replay", "registered", None, False),
    "effector:before-act@WorktreeRequested.v2": ("replay", "registered", None, False),
    "effector:after-act@WorktreeRequested.v2": ("replay", "registered", None, False),
    "effector:after-outcome@WorktreeRequested.v2": ("replay", "registered", None, False),
    "workspace:before-rename": ("replay", "registered", None, False),  # a staging folder left: replay makes it anew
    "workspace:after-rename": ("replay", "registered", None, False),  # in place, unobserved: replay finds it
    "effector:before-observe@WorkerLaunchRequested.v1": ("replay", "launch-failed", "launcher-gone", False),
    "effector:after-observe@WorkerLaunchRequested.v1": ("replay", "launch-failed", "launcher-gone", False),
    "effector:before-act@WorkerLaunchRequested.v1": ("replay", "launch-failed", "launcher-gone", False),
    "effector:after-act@WorkerLaunchRequested.v1": ("replay", "launch-failed", "launcher-gone", False),
    "effector:after-outcome@WorkerLaunchRequested.v1": ("reconcile", "exited", "unknown", False),
    "launch:before-gate": ("reconcile", "exited", "unknown", False),
    "launch:after-gate": ("reconcile", "exited", "stopped", True),  # the agent runs unsupervised: stopped
    "supervise:before-exit": ("reconcile", "exited", "unknown", True),
}
assert set(LAUNCH_CASES) == set(WORKTREE_POINTS + LAUNCH_POINTS)
HELD_AT_THE_GATE = {"effector:after-act@WorkerLaunchRequested.v1", "effector:after-outcome@WorkerLaunchRequested.v1",
                    "launch:before-gate"}

DEADLINE_SECONDS = 60.0


# ---------------------------------------------------------------- helpers


def wait_for(condition, what: str, seconds: float = DEADLINE_SECONDS):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


def ledger_processes(ledger: Path) -> list[psutil.Process]:
    """Live (non-zombie) processes whose environment has DOCKET_LEDGER=<this ledger>: agents and gated shells."""
    names = {str(ledger), str(ledger.resolve())}
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get("DOCKET_LEDGER") in names:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def kill_ledger_processes(ledger: Path) -> None:
    for process in ledger_processes(ledger):
        try:
            pgid = os.getpgid(process.pid)
            if pgid != os.getpgrp():
                os.killpg(pgid, signal.SIGKILL)
            process.kill()
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass


def marker_counts(marker: Path) -> Counter[int]:
    """How many processes ran the agent, per generation."""
    if not marker.exists():
        return Counter()
    return Counter(int(line.split()[0]) for line in marker.read_text().splitlines() if line.strip())


def worker_history(ledger_path: Path) -> list:  # noqa: ANN201
    ledger = Ledger(ledger_path)
    try:
        return [event for _, event in ledger.history(worker_aggregate.stream_of(TASK))]
    finally:
        ledger.close()


def worker_state(ledger_path: Path) -> worker_aggregate.Worker | None:
    ledger = Ledger(ledger_path)
    try:
        return ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(TASK))
    finally:
        ledger.close()


def generations_launched(ledger_path: Path) -> tuple[set[int], set[int]]:
    """(generations that asked for a launch, generations whose process identity was recorded)."""
    history = worker_history(ledger_path)
    asked = {e.generation for e in history if e.type_name() == "WorkerLaunchRequested.v1"}
    recorded = {e.generation for e in history if e.type_name() == "WorkerLaunched.v1"}
    return asked, recorded


def task_worktrees(repo: Path) -> list[str]:
    """The task's workspaces (repositories of their own on its branch), and every staging leftover beside them;
    the user's repository has no linked worktree at all."""
    assert git(repo, "worktree", "list").count("\n") == 0
    folder = task_worktree_path(repo / ".git", RUN, TASK).parent
    found = sorted(folder.iterdir()) if folder.is_dir() else []
    return [str(p) for p in found if p.name.startswith(".") or
            git(p, "symbolic-ref", "HEAD") == f"refs/heads/docket/{RUN}/{TASK}"]


def agent_command(marker: Path, seconds: float | int = 0, until: Path | None = None) -> list[str]:
    return ["--", "sh", str(AGENT), str(marker), str(seconds), *([str(until)] if until else [])]


def launch_args(marker: Path, seconds: float | int = 0, until: Path | None = None, *options: str) -> list[str]:
    return ["worker", "launch", RUN, "--task", TASK, *options, *agent_command(marker, seconds, until)]


def assert_converged(docket, repo: Path, marker: Path) -> None:  # noqa: ANN001
    """The properties every recovery must leave, whatever the crash."""
    worktrees = task_worktrees(repo)
    assert len(worktrees) <= 1, worktrees
    if worktrees:
        assert Path(worktrees[0]) == task_worktree_path(repo / ".git", RUN, TASK)
        assert (Path(worktrees[0]) / "README.md").read_text() == "hello\n"
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert "error" not in fsck.stderr.lower() and "warning" not in fsck.stderr.lower(), fsck.stderr
    assert docket("status", "--json").json()["pending_intents"] == []
    assert ledger_processes(docket.ledger) == []  # no orphan
    counts = marker_counts(marker)
    assert all(n == 1 for n in counts.values()), counts  # at most one process per generation ran the agent
    asked, recorded = generations_launched(docket.ledger)
    time.sleep(0.5)  # a gated process that wrongly ran the agent would have written its line by now
    never_recorded = asked - recorded
    assert not never_recorded & set(marker_counts(marker)), (never_recorded, marker_counts(marker))
    again = docket("reconcile", "--json").json()  # nothing left to converge
    assert again["findings"] == [], again
    assert docket("replay", "--apply", "--json").json()["applied"] == []
    assert docket("verify").returncode == 0


def recover(docket, how: str) -> None:  # noqa: ANN001
    if how == "replay":
        result = docket("replay", "--apply", "--json", check=False)
        assert result.returncode in (0, 1), result.stderr  # 1 only if views had drifted: they are rebuilt
    # the killed docket's supervision of the run is a process, no intent: only reconcile ends it
    docket("reconcile", "--apply", "--json")


def launch_again(docket, marker: Path, expected_generation: int) -> None:  # noqa: ANN001
    """A new launch for the task after the crash works: the next generation runs the agent once, exit 0."""
    result = docket(*launch_args(marker, 0, None, "--json"))
    assert result.returncode == 0, result.stderr
    doc = result.json()
    assert doc["generation"] == expected_generation and doc["result"] == "ok", doc
    assert marker_counts(marker)[expected_generation] == 1
    assert worker_state(docket.ledger).status == "exited"


@pytest.fixture
def world(docket, repo, tmp_path):  # noqa: ANN001, ANN201
    """An initialised repository with run r1 and task t1; every process started for its ledger is killed after."""
    started: list[subprocess.Popen] = []
    docket("init")
    # the marker agent records every run in a file outside its worktree, which a sandbox forbids: crash recovery,
    # not the sandbox, is what these tests are about (tests/attacks/ has the sandbox's)
    (repo / "docket.toml").write_text('sandbox = "off"\n')
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)

    def background(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "docket", *args], cwd=repo, env=env or docket.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    try:
        yield background, tmp_path / "marker"
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        kill_ledger_processes(docket.ledger)


# ---------------------------------------------------------------- worktree and launch


@pytest.mark.slow
@pytest.mark.parametrize("point", list(LAUNCH_CASES))
def test_crash_during_launch_then_recovery_converges(docket, repo, world, point):
    _, marker = world
    how, status, cause, agent_ran = LAUNCH_CASES[point]
    # a long agent after the gate opens, so reconcile finds it running unsupervised; else one that ends at once
    seconds = 30 if point == "launch:after-gate" else 0
    crashed = docket(*launch_args(marker, seconds), fault=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    if agent_ran:
        wait_for(lambda: marker_counts(marker)[1] == 1, "the agent's marker line")

    recover(docket, how)

    worker = worker_state(docket.ledger)
    assert (worker.generation, worker.status, worker.exit_cause) == (1, status, cause)
    assert marker_counts(marker)[1] == (1 if agent_ran else 0)
    log = repo / ".git" / "docket" / "logs" / TASK / "1.log"
    if point in HELD_AT_THE_GATE:  # a process was started (its log made), held, and exited without running the agent
        assert log.exists() and log.read_bytes() == b""
    if status == "registered":  # the crash came before any launch was asked for: the worktree is all there is
        assert generations_launched(docket.ledger) == (set(), set())
    assert len(task_worktrees(repo)) == 1
    assert_converged(docket, repo, marker)
    # a worker that never launched keeps generation 1; one whose launch was asked for moves on to 2
    launch_again(docket, marker, expected_generation=1 if status == "registered" else 2)
    assert_converged(docket, repo, marker)


# ---------------------------------------------------------------- stop


@pytest.mark.slow
@pytest.mark.parametrize("supervised", [True, False], ids=["supervised", "unsupervised"])
@pytest.mark.parametrize("point", STOP_POINTS)
def test_crash_during_stop_then_reconcile_converges(docket, repo, world, point, supervised):
    """`docket worker stop` killed at each point of its intent.

    supervised: the `worker launch` that supervises the agent still runs; it sees the stop request in the ledger
    and finishes it itself. unsupervised: the launch was killed right after its gate opened, so nothing but the
    stop command (and then reconcile) acts on the agent. Either way reconcile --apply leaves nothing to do.
    """
    background, marker = world
    if supervised:
        launch = background(*launch_args(marker, 60))
    else:
        crashed = docket(*launch_args(marker, 60), fault="launch:after-gate")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    wait_for(lambda: marker_counts(marker)[1] == 1, "the agent's marker line")
    wait_for(lambda: getattr(worker_state(docket.ledger), "status", None) == "running", "the worker to run")

    crashed = docket("worker", "stop", TASK, fault=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    if supervised:
        _, stderr = launch.communicate(timeout=120)
        assert launch.returncode in (6, 7), stderr  # 7: it saw the stop first; 6: the stop's signal ended it first
        assert "Traceback" not in stderr

    docket("reconcile", "--apply", "--json")

    worker = worker_state(docket.ledger)
    assert (worker.generation, worker.status) == (1, "exited")
    history = worker_history(docket.ledger)
    stops = [e for e in history if e.type_name() == "WorkerStopRequested.v1"]
    outcomes = [e for e in history if e.type_name() == "WorkerStopped.v1"]
    assert len(stops) == 1 and [e.intent_id for e in outcomes] == [stops[0].intent_id]
    assert marker_counts(marker)[1] == 1
    assert_converged(docket, repo, marker)
    launch_again(docket, marker, expected_generation=2)
    assert_converged(docket, repo, marker)


# ---------------------------------------------------------------- random instants


@pytest.mark.slow
@pytest.mark.campaign
def test_sigkill_at_random_instants_of_launch_and_supervision_then_reconcile_converges(docket, repo, world):
    """10 rounds (`make test`: the first 4, seed 7's early, late, late, early kills; `make test-campaigns`: all): launch an agent that runs 1.5 s, SIGKILL the docket process after a seeded random delay
    (anywhere from its startup to after the agent's end), reconcile --apply, check convergence; the next round
    launches the same task again."""
    background, marker = world
    rng = random.Random(7)
    outcomes = Counter()
    for _ in range(campaign_rounds(10, 4)):
        launch = background(*launch_args(marker, 1.5))
        # half the kills land before the gate (docket needs ~0.5-1 s to get there), half around the agent's run
        time.sleep(rng.uniform(0.0, 1.0) if rng.random() < 0.5 else rng.uniform(1.0, 5.0))
        if launch.poll() is None:
            launch.send_signal(signal.SIGKILL)
        _, stderr = launch.communicate(timeout=120)
        assert launch.returncode in (-signal.SIGKILL, 0), stderr
        assert "Traceback" not in stderr
        killed = launch.returncode == -signal.SIGKILL

        docket("reconcile", "--apply", "--json")

        worker = worker_state(docket.ledger)  # None: killed before the worker was registered
        assert worker is None or worker.status in ("registered", "exited", "launch-failed"), worker
        outcomes[(killed, worker and worker.status, worker and worker.exit_cause)] += 1
        assert_converged(docket, repo, marker)
    assert len(outcomes) >= 2, outcomes  # the kills landed at different stages (seed 7: four different ones)
    final = worker_state(docket.ledger)
    # a registered generation (killed after its relaunch was recorded, before its launch) is the one launched next
    launch_again(docket, marker, expected_generation=1 if final is None else final.generation
                 if final.status == "registered" else final.generation + 1)
    assert_converged(docket, repo, marker)


# ---------------------------------------------------------------- race


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_two_launches_of_one_task_at_once_run_the_agent_once(docket, repo, world, tmp_path, attempt):
    """Before the worktree lock (adapters/world/git/repository.py), 3 of 4 attempts broke: each launch cleaned up the other's
    half-made worktree (os-error, an internal KeyError) or recorded it as diverged, for good."""
    background, marker = world
    release = tmp_path / "release"  # the winner's agent runs until the loser has answered
    launches = [background(*launch_args(marker, 60, release)) for _ in range(2)]
    first = wait_for(lambda: next((p for p in launches if p.poll() is not None), None), "one launch to end")
    _, first_err = first.communicate(timeout=120)
    release.touch()
    other = launches[1 - launches.index(first)]
    _, other_err = other.communicate(timeout=120)

    assert first.returncode == 3, first_err  # the loser fails cleanly while the winner's agent runs
    lines = first_err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("docket: error: "), first_err
    code = lines[0].removeprefix("docket: error: ").split(":")[0]
    # which check refuses it depends on how far the winner got: its worker, its lease, its launch
    assert code in ("worker-running", "generation-used", "lease-held", "lease-holder-unknown",
                    "launched-elsewhere"), first_err
    assert other.returncode == 0, other_err
    assert "Traceback" not in first_err + other_err
    assert marker_counts(marker) == Counter({1: 1})
    assert len(task_worktrees(repo)) == 1
    assert_converged(docket, repo, marker)
