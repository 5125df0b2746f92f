"""Promise 2 for candidates and checks: docket SIGKILLed while it pins, releases, runs a check or removes a worktree,
then `docket replay --apply` and `docket reconcile --apply` converge.

Every case kills the real CLI at a named crash point (DOCKET_FAULT) or at a
random instant, recovers (replay drives the pending intents and finishes check
runs nothing can be running; reconcile stops a check's group whose docket is
gone and finishes its run), and checks what someone who left it overnight would
want to find (assert_converged): one ref per pinned binding naming its commit
and no other, no execution worktree or checkout left, one outcome per intent and
one result per check run, nothing pending, no process of this ledger, `git fsck
--strict` clean, nothing for reconcile or replay to do, a verifiable chain. The
command then works again.
"""

from __future__ import annotations

from docket.adapters.world.workspaces.data_owners import OWNERS_FILE
from docket.adapters.world.workspaces.execution_pool import POOL, idle_only
from docket.adapters.world.files.paths import executions_root, task_worktree_path
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
from docket.adapters.world.ledger.store import decode_event
from docket.domain import candidate as candidate_aggregate
from docket.domain import task as task_aggregate

from ..conftest import campaign_rounds, campaign_split, git
from .test_worker_crashes import effector_points, kill_ledger_processes, ledger_processes, wait_for

RUN, TASK = "r1", "t1"
CONFIG = """\
[checks.ok]
command = ["true"]

[checks.slow]
command = ["sh", "-c", "sleep 0.5"]
"""
AGENT_EDIT = "echo made by the agent > new.txt"

PIN_POINTS = [*effector_points("CandidatePinRequested.v1"), "pin:after-capture"]
RELEASE_POINTS = effector_points("CandidateReleaseRequested.v1")
# the pin `worker launch` makes when its agent exits: point -> whether recovery finds it pinned (its intent recorded)
AUTO_PIN_CASES = {"supervise:before-pin": False, "pin:after-capture": False,
                  **{point: True for point in effector_points("CandidatePinRequested.v1")}}
# point: (the check run's result after recovery (interrupted: CheckFailed code interrupted), whether the crash left
# its execution behind for recovery to remove)
CHECK_CASES = {
    "effector:before-observe@ExecutionRequested.v2": ("interrupted", False),
    "effector:after-observe@ExecutionRequested.v2": ("interrupted", False),
    "effector:before-act@ExecutionRequested.v2": ("interrupted", False),
    "effector:after-act@ExecutionRequested.v2": ("interrupted", True),
    "effector:after-outcome@ExecutionRequested.v2": ("interrupted", True),
    "check:after-request": ("interrupted", False),
    # the execution made from the pool (execution_pool.py): an entry taken, then placed, then in place
    "execution-pool:after-take": ("interrupted", True),
    "execution-pool:before-place": ("interrupted", True),
    "execution-pool:after-place": ("interrupted", True),
    **{point: ("interrupted", True) for point in effector_points("CheckLaunchRequested.v1")},
    "check:before-gate": ("interrupted", True),
    "check:after-exit": ("interrupted", True),  # the command ran and ended; nobody saw how
    "check:before-result": ("interrupted", True),
    "check:after-result": ("passed", True),
    "effector:before-observe@ExecutionRemovalRequested.v1": ("passed", True),
    "effector:after-observe@ExecutionRemovalRequested.v1": ("passed", True),
    "effector:before-act@ExecutionRemovalRequested.v1": ("passed", True),
    "effector:after-act@ExecutionRemovalRequested.v1": ("passed", False),
    "execution-pool:after-give-back": ("passed", True),  # the folder renamed into the pool, not recorded idle
    "effector:after-outcome@ExecutionRemovalRequested.v1": ("passed", False),
}
for _intent in ("ExecutionRequested.v2", "CheckLaunchRequested.v1", "ExecutionRemovalRequested.v1"):
    assert set(effector_points(_intent)) <= set(CHECK_CASES), _intent
WORKTREE_REMOVAL_POINTS = effector_points("WorktreeRemovalRequested.v1")
# test_crash.py checks every crash point is exercised somewhere
CANDIDATE_POINTS = PIN_POINTS + RELEASE_POINTS + list(AUTO_PIN_CASES) + list(CHECK_CASES) + WORKTREE_REMOVAL_POINTS

RESULT_TYPES = ("CheckPassed.v1", "CheckFailed.v1", "CheckTimedOut.v1")


# ---------------------------------------------------------------- reading the ledger and git


def ledger_events(ledger_path: Path) -> list:  # noqa: ANN201
    ledger = Ledger(ledger_path)
    try:
        return [decode_event(n.originator_id, n.originator_version, n.topic, n.state)
                for n in ledger.recorder.select_notifications(start=1, limit=10**9)]
    finally:
        ledger.close()


def candidates(ledger_path: Path) -> list[candidate_aggregate.Candidate]:
    bindings = sorted({e.binding_id for e in ledger_events(ledger_path)
                       if e.type_name() == "CandidatePinRequested.v1"})
    ledger = Ledger(ledger_path)
    try:
        return [ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(b)) for b in bindings]
    finally:
        ledger.close()


def task_state(ledger_path: Path) -> task_aggregate.Task:
    ledger = Ledger(ledger_path)
    try:
        return ledger.get(task_aggregate.apply, task_aggregate.stream_of(TASK))
    finally:
        ledger.close()


def check_results(ledger_path: Path) -> dict[str, list]:
    """check id -> its result events, for every check run requested."""
    events = ledger_events(ledger_path)
    results: dict[str, list] = {e.check_id: [] for e in events if e.type_name() == "CheckRequested.v1"}
    for e in events:
        if e.type_name() in RESULT_TYPES:
            results.setdefault(e.check_id, []).append(e)
    return results


def candidate_refs(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/docket/candidates")
    return dict(line.split(" ") for line in out.splitlines())


def execution_leftovers(repo: Path) -> list[str]:
    """Registered worktrees under docket's executions folder, and anything there but empty folders."""
    root = (executions_root(repo / ".git")).resolve()
    listing = git(repo, "worktree", "list", "--porcelain")
    registered = [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]
    found = [path for path in registered if Path(path).resolve().is_relative_to(root)]
    if root.exists():
        found += [str(p) for p in root.rglob("*") if (p.is_symlink() or not p.is_dir())
                  and p.relative_to(root).parts[0] not in (POOL, OWNERS_FILE)]  # the pool; whose the folder is
        found += [] if idle_only(root / POOL) else [f"{root / POOL} holds an execution not given back"]
    return found


# ---------------------------------------------------------------- recovery and convergence


def replayed(docket) -> dict:  # noqa: ANN001
    """`docket replay --apply --json`: exit 0, or 1 when only views had drifted (a killed command may leave them
    behind; they are rebuilt)."""
    result = docket("replay", "--apply", "--json", check=False)
    assert result.returncode in (0, 1), result.stderr
    if result.returncode == 1:
        assert result.stderr.startswith("docket: error: projection-drift: "), result.stderr
    assert result.json()["snapshot_drift"] == [], result.stdout  # snapshots are committed with their events
    return result.json()


def recover(docket) -> None:  # noqa: ANN001
    replayed(docket)
    docket("reconcile", "--apply", "--json")


def assert_converged(docket, repo: Path, why: str = "") -> list[candidate_aggregate.Candidate]:  # noqa: ANN001
    """The properties every recovery must leave, whatever the crash; the candidates, for the case to look at."""
    found = candidates(docket.ledger)
    assert all(c.status in ("pinned", "released") for c in found), ([(c.binding_id, c.status) for c in found], why)
    # exactly one ref per pinned binding, naming its commit; none for a released one, nothing else
    assert candidate_refs(repo) == {c.ref: c.commit for c in found if c.status == "pinned"}, why
    for c in found:
        if c.status == "pinned":
            assert git(repo, "rev-parse", f"{c.commit}^{{tree}}") == c.tree, why
            assert git(repo, "rev-list", "--parents", "-n", "1", c.commit).split() == [c.commit, c.parent], why
    assert execution_leftovers(repo) == [], why
    events = ledger_events(docket.ledger)
    intents = {e.intent_id for e in events if e.effect_role == "intent"}
    outcomes = Counter(e.intent_id for e in events if e.effect_role == "outcome")
    assert set(outcomes) == intents and set(outcomes.values()) <= {1}, (intents, outcomes, why)
    assert docket("status", "--json").json()["pending_intents"] == [], why
    results = check_results(docket.ledger)
    assert all(len(r) == 1 for r in results.values()), ({k: [e.type_name() for e in v] for k, v in results.items()},
                                                        why)
    assert ledger_processes(docket.ledger) == [], why  # no orphan
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0, (fsck.stdout + fsck.stderr, why)
    assert "error" not in fsck.stderr.lower() and "warning" not in fsck.stderr.lower(), (fsck.stderr, why)
    again = docket("reconcile", "--json").json()  # nothing left to converge
    assert (again["findings"], again["git"], again["unfinished_checks"]) == ([], [], []), (again, why)
    second = replayed(docket)
    assert (second["applied"], second["pending"], second.get("settled", [])) == ([], [], []), (second, why)
    assert docket("verify").returncode == 0, why
    return found


def interrupted_or_passed(result_event) -> str:  # noqa: ANN001
    if result_event.type_name() == "CheckFailed.v1" and result_event.code == "interrupted":
        return "interrupted"
    return {"CheckPassed.v1": "passed", "CheckFailed.v1": "failed", "CheckTimedOut.v1": "timed-out"}[
        result_event.type_name()]


# ---------------------------------------------------------------- the world


@pytest.fixture
def world(docket, repo):  # noqa: ANN001, ANN201
    """Run r1 with task t1 planned and two checks configured; every process started for its ledger is killed after.

    Yields launch(script): `docket worker launch` of an agent running script in the task's worktree (its document).
    """
    docket("init")
    (repo / "docket.toml").write_text(CONFIG)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)

    def launch(script: str) -> dict:
        return docket("worker", "launch", RUN, "--task", TASK, "--json", "--", "sh", "-c", script).json()

    try:
        yield launch
    finally:
        kill_ledger_processes(docket.ledger)


def pinned_by_the_agent(launch) -> dict:  # noqa: ANN001
    """A worker whose agent changed a file, pinned when it exited: its candidate document."""
    pin = launch(AGENT_EDIT)["pin"]
    assert pin["result"] == "pinned", pin
    return pin["candidate"]


def pin(docket) -> dict:  # noqa: ANN001
    doc = docket("candidate", "pin", RUN, "--task", TASK, "--json").json()
    assert doc["result"] == "pinned", doc
    return doc


def crash(docket, *args: str, point: str) -> None:  # noqa: ANN001
    crashed = docket(*args, fault=point)
    assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)


# ---------------------------------------------------------------- pin


# Each crash point of pin, release and worktree removal is recovered from two ways: by recovery (replay and
# reconcile), and by running the command again without it. `make test` tries every point each run, half of them
# one way and half the other, the halves swapping from one run to the next (tests/conftest.py's campaign_split);
# `make test-campaigns` tries every point both ways.
@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", campaign_split(PIN_POINTS, 0))
def test_crash_during_pin_then_recovery_converges_and_pinning_again_finds_the_same_binding(docket, repo, world,
                                                                                          point):
    assert world("true")["pin"]["result"] == "unchanged"  # the worker leaves a worktree with nothing to pin
    (task_worktree_path(repo / ".git", RUN, TASK) / "new.txt").write_text("made by hand\n")
    crash(docket, "candidate", "pin", RUN, "--task", TASK, point=point)

    recover(docket)

    found = assert_converged(docket, repo)
    if point == "pin:after-capture":  # captured (objects written, unreferenced); nothing recorded, nothing pinned
        assert found == []
    else:  # the intent was recorded: replay pinned it
        (candidate,) = found
        assert candidate.status == "pinned" and candidate.changed_paths == ("new.txt",)
    again = pin(docket)
    assert [c.binding_id for c in assert_converged(docket, repo)] == [again["binding_id"]]
    if found:
        assert (again["binding_id"], again["commit"]) == (found[0].binding_id, found[0].commit)
    assert candidate_refs(repo) == {again["ref"]: again["commit"]}
    requests = [e for e in ledger_events(docket.ledger) if e.type_name() == "CandidatePinRequested.v1"]
    assert len(requests) == 1  # the same capture pinned again is the same candidate, not a new intent


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", campaign_split(PIN_POINTS, 1))
def test_crash_during_pin_then_pinning_again_without_recovery_finishes_the_same_candidate(docket, repo, world, point):
    """The next pin drives the pending intent of the same capture itself (adopting a ref the killed one made)."""
    assert world("true")["pin"]["result"] == "unchanged"
    (task_worktree_path(repo / ".git", RUN, TASK) / "new.txt").write_text("made by hand\n")
    crash(docket, "candidate", "pin", RUN, "--task", TASK, point=point)

    again = pin(docket)

    (candidate,) = assert_converged(docket, repo)
    assert (candidate.binding_id, candidate.commit) == (again["binding_id"], again["commit"])
    types = [e.type_name() for e in ledger_events(docket.ledger) if e.type_name().startswith("CandidatePin")]
    assert types == ["CandidatePinRequested.v1", "CandidatePinned.v1"]


@pytest.mark.slow
@pytest.mark.parametrize("point", list(AUTO_PIN_CASES))
def test_crash_during_the_automatic_pin_then_recovery_converges_and_a_manual_pin_finds_it(docket, repo, world,
                                                                                         point):
    crash(docket, "worker", "launch", RUN, "--task", TASK, "--", "sh", "-c", AGENT_EDIT, point=point)

    recover(docket)

    found = assert_converged(docket, repo)
    assert [e.type_name() for e in ledger_events(docket.ledger) if e.type_name() == "WorkerExited.v1"] \
        == ["WorkerExited.v1"]  # the exit was recorded before the worktree was captured
    assert (task_worktree_path(repo / ".git", RUN, TASK) / "new.txt").read_text() == "made by the agent\n"  # the work is still there
    assert [c.changed_paths for c in found] == ([("new.txt",)] if AUTO_PIN_CASES[point] else [])
    again = pin(docket)
    assert (again["generation"], again["changed_paths"]) == (1, ["new.txt"])  # bound to the worker's generation
    (candidate,) = assert_converged(docket, repo)
    if found:
        assert (again["binding_id"], again["commit"]) == (found[0].binding_id, found[0].commit)
    assert candidate_refs(repo) == {candidate.ref: again["commit"]}


# ---------------------------------------------------------------- release


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", campaign_split(RELEASE_POINTS, 0))
def test_crash_during_release_then_recovery_converges_and_release_and_pin_work_again(docket, repo, world, point):
    pinned = pinned_by_the_agent(world)
    crash(docket, "candidate", "release", pinned["binding_id"], point=point)

    recover(docket)

    (candidate,) = assert_converged(docket, repo)
    assert candidate.status == "released" and candidate_refs(repo) == {}  # the release was asked for: it happened
    again = docket("candidate", "release", pinned["binding_id"], "--json").json()
    assert again["result"] == "released"
    assert [e.type_name() for e in ledger_events(docket.ledger) if e.type_name().startswith("CandidateRelease")] \
        == ["CandidateReleaseRequested.v1", "CandidateReleased.v1"]
    repinned = pin(docket)  # the worktree still holds the work: the same capture, the same binding, one ref again
    assert repinned["binding_id"] == pinned["binding_id"]
    (candidate,) = assert_converged(docket, repo)
    assert candidate.status == "pinned" and candidate_refs(repo) == {pinned["ref"]: repinned["commit"]}


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", campaign_split(RELEASE_POINTS, 1))
def test_crash_during_release_then_releasing_again_without_recovery_finishes_it(docket, repo, world, point):
    pinned = pinned_by_the_agent(world)
    crash(docket, "candidate", "release", pinned["binding_id"], point=point)

    again = docket("candidate", "release", pinned["binding_id"], "--json").json()

    assert again["result"] == "released"
    (candidate,) = assert_converged(docket, repo)
    assert candidate.status == "released" and candidate_refs(repo) == {}
    assert [e.type_name() for e in ledger_events(docket.ledger) if e.type_name().startswith("CandidateRelease")] \
        == ["CandidateReleaseRequested.v1", "CandidateReleased.v1"]


# ---------------------------------------------------------------- check run


@pytest.mark.slow
@pytest.mark.parametrize("point", list(CHECK_CASES))
def test_crash_during_check_run_then_recovery_records_one_result_and_the_next_attempt_passes(docket, repo, world,
                                                                                           point):
    pinned = pinned_by_the_agent(world)
    binding = pinned["binding_id"]
    result_after, execution_left = CHECK_CASES[point]
    crash(docket, "check", "run", binding, "--check", "ok", point=point)
    assert bool(execution_leftovers(repo)) == execution_left, execution_leftovers(repo)

    recover(docket)

    assert_converged(docket, repo)
    ((check_id, (result,)),) = check_results(docket.ledger).items()
    assert interrupted_or_passed(result) == result_after, result
    again = docket("check", "run", binding, "--check", "ok", "--json")
    (outcome,) = again.json()["checks"]
    assert (outcome["result"], outcome["attempt"], outcome["execution_state"]) == ("passed", 2, "removed"), outcome
    assert outcome["check_id"] != check_id
    (candidate,) = assert_converged(docket, repo)
    assert (candidate.status, candidate.commit) == ("pinned", pinned["commit"])
    assert [run.attempt for run in candidate.checks] == [1, 2]


@pytest.mark.slow
def test_docket_killed_while_its_check_runs_then_replay_leaves_it_and_reconcile_stops_it(docket, repo, world,
                                                                                         tmp_path):
    """No named point: the check's command runs, ungated, when its docket dies. Replay may not touch it (it may
    still be watched by someone); reconcile, seeing its supervisor dead, stops its group, records it interrupted
    and removes its execution."""
    marker = tmp_path / "check-started"
    with (repo / "docket.toml").open("a") as config:
        config.write(f'\n[checks.long]\ncommand = ["sh", "-c", "echo $$ > {marker}; exec sleep 60"]\n'
                     f'write = ["{tmp_path}"]\n')  # its sandbox lets it write the marker
    binding = pinned_by_the_agent(world)["binding_id"]
    proc = background(docket, "check", "run", binding, "--check", "long")
    wait_for(lambda: marker.exists() and marker.read_text().strip(), "the check to start")
    proc.kill()
    proc.communicate(timeout=120)
    check_pid = int(marker.read_text())
    assert psutil.pid_exists(check_pid)

    replayed(docket)
    assert psutil.Process(check_pid).status() != psutil.STATUS_ZOMBIE  # replay leaves a check that may be watched
    ((check_id, results),) = check_results(docket.ledger).items()
    assert results == [] and len(execution_leftovers(repo)) > 0  # no result, and its execution stays while it runs
    unfinished = docket("reconcile", "--json").json()["unfinished_checks"]
    assert [u["check_id"] for u in unfinished] == [check_id]

    docket("reconcile", "--apply", "--json")

    assert not psutil.pid_exists(check_pid) or psutil.Process(check_pid).status() == psutil.STATUS_ZOMBIE
    assert_converged(docket, repo)
    ((_, (result,)),) = check_results(docket.ledger).items()
    assert interrupted_or_passed(result) == "interrupted", result
    again = docket("check", "run", binding, "--check", "ok", "--json").json()
    assert [(c["result"], c["attempt"]) for c in again["checks"]] == [("passed", 1)]  # attempts are per check
    assert_converged(docket, repo)


# ---------------------------------------------------------------- worktree remove


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", campaign_split(WORKTREE_REMOVAL_POINTS, 0))
def test_crash_during_worktree_remove_then_recovery_removes_it_and_keeps_the_candidate(docket, repo, world, point):
    pinned = pinned_by_the_agent(world)
    crash(docket, "worktree", "remove", TASK, point=point)

    recover(docket)

    (candidate,) = assert_converged(docket, repo)
    assert candidate_refs(repo) == {pinned["ref"]: pinned["commit"]}  # the work is kept by its candidate
    task = task_state(docket.ledger)
    assert (task.worktree, task.removed) == (None, str(task_worktree_path(repo / ".git", RUN, TASK)))  # the removal was asked for: it happened
    assert not (task_worktree_path(repo / ".git", RUN, TASK)).exists()
    assert git(repo, "branch", "--list", f"docket/{RUN}/{TASK}") == ""
    again = docket("worktree", "remove", TASK, check=False)  # asked again: it says the worktree was removed
    assert again.returncode == 3 and again.stderr.startswith("docket: error: no-worktree: "), again.stderr
    assert "was removed" in again.stderr
    assert_converged(docket, repo)


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", campaign_split(WORKTREE_REMOVAL_POINTS, 1))
def test_crash_during_worktree_remove_then_removing_again_without_recovery_finishes_it(docket, repo, world, point):
    pinned = pinned_by_the_agent(world)
    crash(docket, "worktree", "remove", TASK, point=point)

    again = docket("worktree", "remove", TASK, "--json", check=False)

    if point.startswith("effector:after-outcome@"):  # the removal was recorded: asked again, it says so
        assert again.returncode == 3 and again.stderr.startswith("docket: error: no-worktree: "), again.stderr
        assert "was removed" in again.stderr
    else:  # the pending removal is driven by the next command
        assert again.returncode == 0 and again.json()["result"] == "removed", again.stderr
    assert_converged(docket, repo)
    assert candidate_refs(repo) == {pinned["ref"]: pinned["commit"]}
    assert task_state(docket.ledger).worktree is None and not (task_worktree_path(repo / ".git", RUN, TASK)).exists()
    assert [e.type_name() for e in ledger_events(docket.ledger) if e.type_name().startswith("WorktreeRemov")] \
        == ["WorktreeRemovalRequested.v1", "WorktreeRemoved.v1"]


# ---------------------------------------------------------------- random instants


def background(docket, *args: str) -> subprocess.Popen:  # noqa: ANN001
    return subprocess.Popen([sys.executable, "-m", "docket", *args], cwd=docket.cwd, env=docket.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_after(proc: subprocess.Popen, seconds: float) -> bool:
    """SIGKILL the process after seconds unless it ended by then; whether it was killed."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (-signal.SIGKILL, 0), stderr
    assert "Traceback" not in stderr
    return proc.returncode == -signal.SIGKILL


def timed(docket, *args: str) -> float:  # noqa: ANN001
    """How long the command takes here, now (the random kills are spread over that, whatever the machine's load)."""
    started = time.monotonic()
    docket(*args)
    return time.monotonic() - started


@pytest.mark.slow
@pytest.mark.campaign
def test_sigkill_at_random_instants_of_check_run_then_recovery_converges(docket, repo, world):
    """12 rounds (`make test`: the first 4; `make test-campaigns`: all): `check run` of a check that sleeps 0.5 s,
    SIGKILLed after a seeded random delay (from its start-up to a little after it would have ended), recovered; every
    run has exactly one result, passed or interrupted."""
    seed = 8
    rng = random.Random(seed)
    rounds = campaign_rounds(12, 4)
    binding = pinned_by_the_agent(world)["binding_id"]
    lasts = timed(docket, "check", "run", binding, "--check", "slow")
    killed = Counter()
    for round_ in range(rounds):
        killed[kill_after(background(docket, "check", "run", binding, "--check", "slow"),
                          rng.uniform(0.0, 1.2 * lasts))] += 1
        recover(docket)
        assert_converged(docket, repo, f"seed {seed}, round {round_}")
    runs = check_results(docket.ledger)
    results = Counter(interrupted_or_passed(r[0]) for r in runs.values())
    assert set(results) <= {"passed", "interrupted"}, (results, f"seed {seed}")
    assert killed[True] >= 1, (killed, results, f"seed {seed}")
    print(f"check run, seed {seed}: killed {killed[True]} of {rounds}; results {dict(results)}")
    again = docket("check", "run", binding, "--check", "slow", "--json").json()
    (outcome,) = again["checks"]
    assert (outcome["result"], outcome["attempt"]) == ("passed", len(runs) + 1), (outcome, f"seed {seed}")
    assert_converged(docket, repo, f"seed {seed}, after")


@pytest.mark.slow
@pytest.mark.campaign
def test_sigkill_at_random_instants_of_candidate_pin_then_recovery_converges(docket, repo, world):
    """12 rounds (`make test`: the first 4; `make test-campaigns`: all): change the worktree, `candidate pin`
    SIGKILLed after a seeded random delay, recover; each round leaves its binding pinned (the intent was recorded) or
    nothing (it was not), and pinning again finds it."""
    seed = 8
    rng = random.Random(seed)
    rounds = campaign_rounds(12, 4)
    assert world("true")["pin"]["result"] == "unchanged"
    (task_worktree_path(repo / ".git", RUN, TASK) / "first.txt").write_text("first\n")
    lasts = timed(docket, "candidate", "pin", RUN, "--task", TASK)  # the first capture hashes every file:
    lasts = min(lasts, timed(docket, "candidate", "pin", RUN, "--task", TASK))  # the warm one is the one to kill
    killed, recovered = Counter(), 0
    for round_ in range(rounds):
        (task_worktree_path(repo / ".git", RUN, TASK) / f"round-{round_}.txt").write_text(f"{round_}\n")
        # its first half is start-up and capture: most kills land after it, where the pin is recorded and made
        was_killed = kill_after(background(docket, "candidate", "pin", RUN, "--task", TASK),
                                rng.uniform(0.3 * lasts, 1.3 * lasts))
        killed[was_killed] += 1
        recover(docket)
        why = f"seed {seed}, round {round_}"
        before = {c.binding_id for c in assert_converged(docket, repo, why)}
        again = pin(docket)
        recovered += was_killed and again["binding_id"] in before
        after = assert_converged(docket, repo, why)
        assert {c.binding_id for c in after} == before | {again["binding_id"]}, why
        assert candidate_refs(repo)[again["ref"]] == again["commit"], why
        assert Counter(e.binding_id for e in ledger_events(docket.ledger)
                       if e.type_name() == "CandidatePinRequested.v1")[again["binding_id"]] == 1, why
    assert killed[True] >= 1, (killed, f"seed {seed}")
    print(f"candidate pin, seed {seed}: killed {killed[True]} of {rounds}; of those pinned by recovery {recovered}")


# ---------------------------------------------------------------- found while writing these


@pytest.mark.slow
def test_replay_after_a_check_run_finds_no_snapshot_drift(docket, repo, world):
    """Before candidate streams were in adapters/service_layer/kernel/aggregates.py, the ledger snapshotted them every 10 versions and
    replay, finding no fold for them, called each snapshot drifted and exited 1."""
    binding = pinned_by_the_agent(world)["binding_id"]  # versions 1-2 of the candidate's stream
    docket("check", "run", binding, "--check", "ok")  # versions 3-10: the ledger snapshots the stream
    replay = docket("replay", "--apply", check=False)
    assert replay.returncode == 0, replay.stderr
