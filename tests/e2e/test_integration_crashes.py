"""docket integrate SIGKILLed at every named point of the merge queue, then run again: it converges to the same target
commit and tree as an uninterrupted run, with one merge commit per step, one completion and a valid chain.

One world (two tasks with clean, checked and offered candidates) is made once and restored at the same path before
each case: the ledger records absolute paths, so a copy elsewhere would not be the same world.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from ..conftest import Docket, campaign_rounds, git, make_repo
from .test_integration import RUN, TARGET, fsck, make_world, merges_on, offered, payloads, tip
from .test_worker_crashes import effector_points

INTEGRATION_POINTS = [
    "integrate:after-prepare",
    "integrate:after-merge-computed",
    "integrate:after-step",
    "integrate:before-verified",
    "integrate:before-target",
    *effector_points("IntegrationStepRequested.v1"),
    *effector_points("IntegrationTargetRequested.v2"),
]
# The target's move when a worktree has it checked out: exercised in test_integration_checkout.py, on main.
CHECKOUT_POINTS = [
    "integrate:before-target",
    "integrate:after-checkout-update",
    *effector_points("IntegrationTargetRequested.v2"),
]
QUEUE_POINTS = list(INTEGRATION_POINTS)
INTEGRATION_POINTS += [point for point in CHECKOUT_POINTS if point not in INTEGRATION_POINTS]


class World:
    def __init__(self, docket: Docket, archive: Path):
        self.docket, self.archive = docket, archive

    def restore(self) -> Docket:
        shutil.rmtree(self.docket.cwd)
        with tarfile.open(self.archive) as tar:
            tar.extractall(self.docket.cwd.parent, filter="tar")
        return self.docket


@pytest.fixture(scope="module")
def world(tmp_path_factory):  # noqa: ANN001, ANN201
    import os

    root = tmp_path_factory.mktemp("integration-world")
    repo = make_repo(root / "repo")
    docket = Docket(repo, {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")})
    make_world(docket)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    archive = root / "world.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(repo, arcname="repo")
    world = World(docket, archive)
    expected = tip(docket)
    reference = docket("integrate", RUN, "--json").json()
    assert reference["status"] == "completed"
    world.expected, world.reference = expected, reference  # type: ignore[attr-defined]
    return world


@pytest.mark.slow
@pytest.mark.parametrize("point", QUEUE_POINTS)
def test_integrate_killed_at_a_point_converges_when_run_again(world, point):  # noqa: ANN001
    docket = world.restore()
    reference = world.reference
    crashed = docket("integrate", RUN, fault=point)
    assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)
    done = docket("integrate", RUN, "--json").json()
    assert (done["status"], done["final_commit"], done["final_tree"]) == (
        "completed", reference["final_commit"], reference["final_tree"])
    assert [s["merge_commit"] for s in done["steps"]] == [s["merge_commit"] for s in reference["steps"]]
    assert tip(docket) == reference["final_commit"]
    assert git(docket.cwd, "rev-parse", f"{TARGET}^{{tree}}") == reference["final_tree"]
    merges = merges_on(docket, world.expected)
    assert Counter(merges) == Counter(s["merge_commit"] for s in reference["steps"])  # one merge commit per step
    assert len(payloads(docket, "IntegrationCompleted.v1")) == 1
    assert len(payloads(docket, "IntegrationPrepared.v1")) == 1
    assert Counter(m["step"] for m in payloads(docket, "IntegrationStepMerged.v1")) == {1: 1, 2: 1}
    verified = payloads(docket, "IntegrationStepVerified.v1")
    assert [v["step"] for v in verified] == [1, 2]
    bindings = {v["verification_binding"] for v in verified}
    rechecked = [p for p in payloads(docket, "CheckRequested.v1") if p["binding_id"] in bindings]
    assert len(rechecked) == 2  # each merged tree checked once, never twice
    fsck(docket)
    docket("verify")
    again = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/docket/integrations"],
                           cwd=docket.cwd, capture_output=True, text=True, check=True).stdout.split()
    assert again == [f"refs/docket/integrations/{RUN}"]


@pytest.mark.slow
def test_a_step_left_pending_by_a_crash_is_finished_by_replay_and_integrate_goes_on(world):  # noqa: ANN001
    docket = world.restore()
    crashed = docket("integrate", RUN, fault="effector:after-act@IntegrationStepRequested.v1")
    assert crashed.returncode == -signal.SIGKILL
    docket("replay", "--apply")
    (merged,) = payloads(docket, "IntegrationStepMerged.v1")
    assert (merged["step"], merged["result"]) == (1, "observed")
    done = docket("integrate", RUN, "--json").json()
    assert (done["final_commit"], done["final_tree"]) == (world.reference["final_commit"],
                                                          world.reference["final_tree"])
    fsck(docket)


@pytest.mark.slow
@pytest.mark.campaign
def test_integrate_killed_at_random_instants_converges_when_run_again(world):  # noqa: ANN001
    """SIGKILL at random moments, not only at named points (10 in `make test-campaigns`, 4 in `make test`; the seed,
    DOCKET_TEST_SEED or the time, is in every failure's message): each time, running it again ends where an uninterrupted
    run ends, with one merge per step, one completion, no stray docket ref and a valid chain."""
    import os
    import random
    import sys
    import time

    seed = int(os.environ.get("DOCKET_TEST_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    docket = world.restore()
    started = time.monotonic()
    docket("integrate", RUN)
    duration = time.monotonic() - started  # the whole process, start-up included
    killed = 0
    attempts = campaign_rounds(10, 4)
    for attempt in range(attempts):
        docket = world.restore()
        proc = subprocess.Popen([sys.executable, "-m", "docket", "integrate", RUN], cwd=docket.cwd, env=docket.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.1, duration))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=120)
        done = docket("integrate", RUN, "--json", check=False)
        if done.returncode == 4:  # killed mid ref write: its lock is left, and broken once stale (as git never does)
            from docket.adapters.world.git.ref_locks import STALE_LOCK_SECONDS

            time.sleep(STALE_LOCK_SECONDS + 1)
            docket("replay", "--apply")
            done = docket("integrate", RUN, "--json", check=False)
        assert done.returncode == 0, (seed, attempt, done.returncode, done.stderr)
        result = done.json()
        assert (result["final_commit"], result["final_tree"]) == (
            world.reference["final_commit"], world.reference["final_tree"]), (seed, attempt)
        assert Counter(merges_on(docket, world.expected)) == Counter(
            s["merge_commit"] for s in world.reference["steps"]), (seed, attempt)
        assert len(payloads(docket, "IntegrationCompleted.v1")) == 1, (seed, attempt)
        refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/docket/integrations"],
                              cwd=docket.cwd, capture_output=True, text=True, check=True).stdout.split()
        assert refs == [f"refs/docket/integrations/{RUN}"], (seed, attempt)
        fsck(docket)
        docket("verify")
    assert killed >= (3 * attempts + 9) // 10, (seed, killed, duration)  # most instants fall inside the run


@pytest.mark.slow
def test_a_ref_lock_left_by_a_writer_nobody_recorded_is_waited_out_within_the_command(world):  # noqa: ANN001
    """Was: exit 4 (outcome-unknown) while the lock was young, and a second command once it was stale. A lock whose
    writer recorded itself and died is stale at once (tests/attacks/test_folders_resume_locks.py); one nobody
    recorded (as here) is waited out, and the same command goes on."""
    docket = world.restore()
    crashed = docket("integrate", RUN, fault="integrate:after-merge-computed")
    assert crashed.returncode == -signal.SIGKILL
    lock = docket.cwd / ".git" / "refs" / "docket" / "integrations" / f"{RUN}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")  # as a writer killed between taking the lock and renaming it over the ref leaves it
    done = docket("integrate", RUN, "--json").json()
    assert (done["final_commit"], done["final_tree"]) == (world.reference["final_commit"],
                                                          world.reference["final_tree"])
    assert not lock.exists()
    fsck(docket)
    docket("verify")
