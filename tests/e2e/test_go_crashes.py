"""Promise 2 for `docket go`: killed at any named crash point, or at a random moment, `docket go --resume`
ends the run with the tree an uninterrupted run delivers, one receipt, a valid chain, nothing left unowned and no
process left in a docket process group."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import campaign_cases, git
from tests.e2e.go_world import GoWorld, docket_processes, kill, make_go_world, wait_until

GO_POINTS = [
    "run-open:after-intent",
    "go:before-launch",
    "go:after-agent",
    "go:after-pin",
    "go:before-handoff",
    "go:before-feedback",
    "go:before-integrate",
    "go:before-seal",
    "go:before-complete",
    "launch:before-gate",
    "launch:after-gate",
    "supervise:before-exit",
    "pin:after-capture",
    "check:after-request",
    "check:before-gate",
    "handoff:after-observe",
    "integrate:after-prepare",
    "integrate:after-queued",
    "integrate:after-merge-computed",
    "integrate:after-step",
    "integrate:before-verified",
    "integrate:before-target",
    "seal:before-record",
    "effector:before-act@WorkerLaunchRequested.v1",
    "effector:after-act@WorkerLaunchRequested.v1",
    "effector:after-act@CandidatePinRequested.v1",
    "effector:after-observe@WorktreeRequested.v2",
    "store:before-commit",
    "projection:before-commit",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tree an uninterrupted run delivers."""
    world = make_go_world(tmp_path_factory.mktemp("reference"), target="trunk")
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    assert done.returncode == 0, done.stderr
    return world.tree_of("trunk")


def finish(world: GoWorld, run_id: str) -> dict:
    """Run the same command again, unharmed: it must finish the run."""
    done = world.go(run_id, "--target", "trunk", "--parallel", "3")  # the same command again goes on with it
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def assert_converged(world: GoWorld, reference: str, summary: dict, planted: Path | None = None) -> None:
    """planted: a stale lock the test left in the user's repository: reconcile reports it and leaves it alone;
    nothing else may be found."""
    assert summary["outcome"] == "delivered"
    assert world.tree_of("trunk") == reference
    assert len(world.events("ReceiptSealed")) == 1
    moves = world.events("IntegrationCompleted")  # the target moves as steps are verified: each move once
    assert moves and moves[-1]["payload"]["commit"] == git(world.repo, "rev-parse", "trunk")
    assert len({m["payload"]["commit"] for m in moves}) == len(moves)
    assert len(world.events("RunCompleted")) == 1
    verified = world.run("verify")
    assert verified.returncode == 0, verified.stderr
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=20), docket_processes(world.ledger)
    reconcile = world.json("reconcile")
    found_in_git = [f for f in reconcile["git"] if planted is None or f.get("path") != str(planted)]
    if planted is not None:  # reported once older than the stale-lock threshold, never removed
        assert [f["applied"] for f in reconcile["git"] if f.get("path") == str(planted)] in ([], [None])
    assert reconcile["findings"] == [] and found_in_git == [] and reconcile["unfinished_checks"] == []
    # one merge commit per task on the target, each task judged once per generation
    finished = world.events("TaskFinished")
    assert sorted(e["payload"]["task_id"] for e in finished) == ["r1.greet", "r1.name", "r1.shout"]
    judged = [(e["payload"]["task_id"], e["payload"]["generation"]) for e in world.events("TaskFeedbackRecorded")]
    assert len(judged) == len(set(judged))


# The points only a `docket go` reaches run in every `make test`. The others are each reached in every run by the
# crash tests of their own layer too (test_worker_crashes.py, test_candidate_crashes.py, test_handoff_crashes.py,
# test_integration_crashes.py, test_receipts.py, test_crash.py: test_crash.py's first test checks that every point
# has its test): of those, `make test` resumes a go killed at four, in rotation (all of them within five runs), and
# `make test-campaigns` at every one.
GO_ONLY_POINTS = [point for point in GO_POINTS if point.split(":")[0] in ("run-open", "go")
                  or point == "integrate:after-queued"]
SHARED_POINTS = [point for point in GO_POINTS if point not in GO_ONLY_POINTS]


def _go_points() -> list:
    always = campaign_cases(*([point] for point in GO_ONLY_POINTS))
    groups = [SHARED_POINTS[i::4] for i in range(4)]
    return always + campaign_cases(*groups)


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("point", _go_points())
def test_killed_at_a_named_point_then_resumed_delivers_the_same_tree(tmp_path: Path, reference: str, point: str):
    world = make_go_world(tmp_path, target="trunk")
    crashed = world.go("r1", "--target", "trunk", "--parallel", "3", fault=point)
    assert crashed.returncode == -signal.SIGKILL, (point, crashed.returncode, crashed.stderr)
    assert_converged(world, reference, finish(world, "r1"))


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("seed", campaign_cases([1, 2], [3, 4], salt=1))
def test_killed_at_random_moments_then_resumed_delivers_the_same_tree(tmp_path: Path, reference: str, seed: int):
    """Five SIGKILLs at random instants per seed (20 in all under `make test-campaigns`; `make test` runs two of the
    four seeds, in rotation), each followed by a resume that may itself be killed."""
    chance = random.Random(seed)
    world = make_go_world(tmp_path, target="trunk")
    kills = 0
    while kills < 5:
        process = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target",
                              "trunk", "--parallel", "3", "--json")
        time.sleep(chance.uniform(0.05, 2.0))
        if process.poll() is not None:
            out, err = process.communicate()
            assert process.returncode == 0, err + out + json.dumps(world.events("TaskFeedbackRecorded"))
            break  # it finished before the kill: the run is over
        kill(process)
        kills += 1
    assert_converged(world, reference, finish(world, "r1"))


def test_a_check_execution_half_removed_by_a_killed_docket_is_removed_whole_on_resume(tmp_path: Path, reference: str):
    """Killed inside the removal of a check's execution (its folder set aside, git's entry for it still there): the
    removal is not observed as done while anything of it is left (found by the random kills: the entry stayed,
    unowned)."""
    world = make_go_world(tmp_path, target="trunk")
    crashed = world.go("r1", "--target", "trunk", "--parallel", "3",
                       fault="effector:before-act@ExecutionRemovalRequested.v1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    removals = [e["payload"] for e in world.events("ExecutionRemovalRequested")]  # parallel checks: one or more
    execution = Path(removals[0]["path"])
    execution.rename(execution.parent / f".{execution.name}.killed.removing")  # what the act does first
    assert_converged(world, reference, finish(world, "r1"))
    assert not execution.parent.exists() or not list(execution.parent.glob(".*.removing"))


@pytest.mark.parametrize("age", [0, 3600], ids=["fresh", "stale"])
def test_a_lock_on_a_task_branch_in_the_users_repository_blocks_nothing(tmp_path: Path, reference: str, age: int):
    """Task branches used to be made in the user's repository, where a docket killed while making one left
    refs/heads/docket/RUN/TASK.lock (found by the random kills: it kept the worktree from being made). A task's
    branch now lives only in its workspace, a repository of its own made whole in a staging folder (a kill there is
    tested in test_worker_crashes: workspace:before-rename, workspace:after-rename), so such a lock, fresh or stale,
    holds nothing up, and docket leaves the user's refs as they are."""
    world = make_go_world(tmp_path, target="trunk")
    lock = world.repo / ".git" / "refs" / "heads" / "docket" / "r1" / "r1.greet.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # as a writer killed a moment ago, or long ago, leaves it
    os.utime(lock, (time.time() - age, time.time() - age))
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    assert done.returncode == 0, done.stderr + done.stdout
    assert_converged(world, reference, json.loads(done.stdout), planted=lock)
    assert lock.exists()  # not docket's: left alone
