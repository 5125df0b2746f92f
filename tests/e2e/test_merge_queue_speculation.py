"""[integration] speculate under `docket go`: up to N verifications in flight, each on the merge of everything queued
ahead of it; a failing entry in the middle is rejected back to its task, what was built on it is cancelled and
checked again on the new head, the entries ahead land as they pass; killed at random, resumed, nothing is done twice.

The world: bench/batch.py's (task 2's script calls lib.sh's greet; task 5 renames greet to hello in lib.sh and in
every t*.sh it finds, so merged after task 2 it breaks the suite), eight tasks, run by `docket go --parallel 1`.
The suite sleeps 3 s on any tree holding two task scripts or more (7 s with task 5's rename): the tasks' own checks
and the base's are quick, the queue's checks are slow, so steps pile up behind the queue's head and are checked
while it is.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.batch import make_repository, tasks_file
from tests.logged_events import logged_events

TASKS, CALLER, RENAMER = 8, 2, 5
RUN = "spec"
# slower still on a tree with task 5's rename: the steps behind it are merged and checked while it fails
SLOW_SUITE = ('n=$(ls t*.sh 2>/dev/null | wc -l); [ "$n" -lt 2 ] || { sleep 3; ! cat -- *.sh | grep -q hello || sleep 4; }; '
              'for f in t*.sh; do [ -f "$f" ] || continue; sh "$f" >/dev/null || exit 1; done')


class World:
    def __init__(self, tmp_path: Path, *, speculate: int, batch: int = 1, tasks: int = TASKS, checks: int = 0):
        self.repo = make_repository(tmp_path / "repo", batch)
        config = self.repo / "docket.toml"
        text = config.read_text()
        suite = text.split("[checks.suite]\ncommand = ")[1].split("\n")[0]
        config.write_text(text.replace(suite, json.dumps([SLOW_SUITE])).replace("speculate = 1\n",
                                                                                 f"speculate = {speculate}\n")
                          + (f"\n[run]\nchecks = {checks}\n" if checks else ""))
        # the target is not checked out: a commit pushed onto it mid-queue leaves no worktree behind
        subprocess.run(["git", "checkout", "-q", "-b", "work"], cwd=self.repo, check=True)
        self.tasks = tasks_file(tmp_path / "tasks.toml", tasks, CALLER, RENAMER)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("DOCKET_") and k != "PYTHONDONTWRITEBYTECODE"}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "docket", *args]

    def go_args(self) -> list[str]:
        return ["go", "--goal", "speculate", "--tasks", str(self.tasks), "--target", "main", "--parallel", "1",
                "--id", RUN, "--cycles", "3", "--json"]

    def run(self, *args: str, timeout: float = 300, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env, **({"DOCKET_FAULT": fault} if fault else {}))
        return subprocess.run(self.argv(*args), cwd=self.repo, env=env, capture_output=True, text=True,
                              timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*(args or self.go_args())), cwd=self.repo, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def events(self, *types: str) -> list[dict]:
        return [e for e in logged_events(self.repo / ".git" / "docket" / "ledger.sqlite")
                if e["type"].split(".")[0] in types]

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.repo, capture_output=True, text=True, check=True).stdout.strip()

    def tree(self) -> str:
        return self.git("rev-parse", "main^{tree}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tree the same run delivers with one verification at a time."""
    world = World(tmp_path_factory.mktemp("serial"), speculate=1)
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    assert not world.events("IntegrationVerificationStarted")  # speculate 1: today's queue, no speculation
    return world.tree()


def overlapped(world: World) -> bool:
    """Whether a verification started while the one ahead of it had no verdict yet."""
    open_ranges: set[int] = set()
    for e in world.events("IntegrationVerificationStarted", "IntegrationVerificationCancelled",
                          "IntegrationStepVerified", "IntegrationStepRejected", "IntegrationBatchVerified",
                          "IntegrationBatchFailed"):
        kind, p = e["type"].split(".")[0], e["payload"]
        if kind == "IntegrationVerificationStarted":
            if open_ranges:
                return True
            open_ranges.add(p["first_step"])
        elif kind == "IntegrationVerificationCancelled":
            open_ranges.discard(p["first_step"])
        else:
            open_ranges.discard(p.get("first_step", p.get("step")))
    return False


def assert_every_verification_settled(world: World) -> None:
    """Read in ledger order: every verification started was decided or cancelled by the end, one whose steps (or
    steps it assumed) were queued again or dropped was cancelled, never decided, and no check was asked for on a
    cancelled one after it was cancelled."""
    running: dict[str, dict] = {}
    cancelled: dict[str, int] = {}
    gone: set[int] = set()
    for e in world.events("IntegrationVerificationStarted", "IntegrationVerificationCancelled",
                          "IntegrationStepVerified", "IntegrationStepRejected", "IntegrationBatchVerified",
                          "IntegrationBatchFailed", "IntegrationRequeued", "IntegrationBatchRequeued",
                          "CheckRequested"):
        kind, p = e["type"].split(".")[0], e["payload"]
        if kind == "IntegrationVerificationStarted":
            running[p["verification_binding"]] = p
        elif kind == "IntegrationVerificationCancelled":
            assert running.pop(p["verification_binding"], None) is not None, p
            cancelled[p["verification_binding"]] = e["position"]
        elif kind in ("IntegrationRequeued", "IntegrationBatchRequeued"):
            gone.update(p["requeued"])
        elif kind == "CheckRequested":
            assert p["binding_id"] not in cancelled, ("a check asked for on a cancelled verification", p)
        elif "verification_binding" in p:
            v = running.pop(p["verification_binding"], None)
            if v is not None:  # decided: none of its steps, nor any it assumed, was queued again before
                assert not gone & {*v["assumed"], *range(v["first_step"], v["last_step"] + 1)}, (v, gone)
    assert running == {}, f"verifications never decided nor cancelled: {running}"


def test_a_failing_entry_in_the_middle_of_eight_with_speculation_four(tmp_path, reference):
    world = World(tmp_path, speculate=4)
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.tree() == reference
    assert overlapped(world)
    # the failing one went back to its task, with the check's reason
    (rejected,) = world.events("IntegrationStepRejected")
    assert rejected["payload"]["task_id"] == f"{RUN}.t5"
    (feedback,) = [e["payload"] for e in world.events("TaskFeedbackRecorded")
                   if e["payload"]["task_id"] == f"{RUN}.t5"]
    assert feedback["code"] == "integration-rejected"
    # what was built on it was cancelled (and named why), and each of those steps checked again on the new head
    cancelled = world.events("IntegrationVerificationCancelled")
    requeued = [n for e in world.events("IntegrationBatchRequeued") for n in e["payload"]["requeued"]]
    assert cancelled and {e["payload"]["because_of"] for e in cancelled} == {rejected["payload"]["step"]}
    assert_every_verification_settled(world)
    assert all(e["payload"]["first_step"] in requeued for e in cancelled)
    # a cancelled check's processes were stopped and recorded so; a cancelled result is never a verdict
    verdict_bindings = {e["payload"]["verification_binding"] for e in world.events(
        "IntegrationStepVerified", "IntegrationStepRejected")}
    assert not verdict_bindings & {e["payload"]["verification_binding"] for e in cancelled}
    # each started verification names the head it was built on (its first step's merge's first parent, never a
    # rejected merge the integration ref named) and the entries it assumed
    merged = {m["payload"]["step"]: m["payload"]["merge_commit"] for m in world.events("IntegrationStepMerged")}
    onto = {m["payload"]["step"]: m["payload"]["merged_onto"] for m in world.events("IntegrationStepRequested")}
    rejected_merges = {merged[e["payload"]["step"]] for e in world.events("IntegrationStepRejected")}
    given_up = {e["payload"]["verification_binding"] for e in cancelled}
    for e in world.events("IntegrationVerificationStarted"):
        p = e["payload"]
        assert p["merge_commit"] == merged[p["last_step"]]
        assert p["head"] == onto[p["first_step"]]
        # built on a step later rejected: then it was cancelled
        assert p["head"] not in rejected_merges or p["verification_binding"] in given_up
        assert all(n < p["first_step"] for n in p["assumed"])
    # the ones ahead landed as they passed: the target moved before the queue's end, in queue order
    moves = [e["payload"]["commit"] for e in world.events("IntegrationCompleted")]
    assert len(moves) >= 2
    verified = [e["payload"]["tree"] for e in world.events("IntegrationStepVerified")]
    assert {e["payload"]["tree"] for e in world.events("IntegrationCompleted")} <= set(verified)
    # the receipt verifies offline
    keys = tmp_path / "k"
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    assert world.run("export", RUN, "--key", f"{keys}.key", "--out", str(tmp_path / "r.jsonl")).returncode == 0
    checked = world.run("verify-receipt", str(tmp_path / "r.jsonl"), "--key", f"{keys}.pub")
    assert checked.returncode == 0, checked.stderr


def test_a_batch_inside_a_speculation(tmp_path, reference):
    # more check slots than verifications: the tasks' own checks never wait for the queue's, steps pile up
    world = World(tmp_path, speculate=2, batch=2, checks=6)
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    assert world.tree() == reference
    assert [e["payload"]["task_id"] for e in world.events("IntegrationStepRejected")] == [f"{RUN}.t5"]
    started = [(e["payload"]["first_step"], e["payload"]["last_step"])
               for e in world.events("IntegrationVerificationStarted")]
    assert any(last > first for first, last in started)  # ranges of two steps, checked by one run each
    assert world.events("IntegrationBatchVerified")
    assert_every_verification_settled(world)


def test_a_dependent_task_is_queued_behind_its_dependency_once_that_is_verified(tmp_path):
    world = World(tmp_path, speculate=4, tasks=4)
    world.tasks.write_text(world.tasks.read_text().replace('id = "t3"\n', 'id = "t3"\ndepends_on = ["t1"]\n'))
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    queued = {e["payload"]["task_id"]: e["position"] for e in world.events("IntegrationStepQueued")}
    verified = {e["payload"]["task_id"]: e["position"] for e in world.events("IntegrationStepVerified")}
    assert queued[f"{RUN}.t3"] > verified[f"{RUN}.t1"]
    for e in world.events("IntegrationVerificationStarted"):
        if f"{RUN}.t3" in e["payload"]["tasks"]:  # it never assumed its dependency: that was verified
            steps = {s["payload"]["step"]: s["payload"]["task_id"] for s in world.events("IntegrationStepQueued")}
            assert f"{RUN}.t1" not in {steps[n] for n in e["payload"]["assumed"]}
    assert all(f"t{n}.sh" in world.git("ls-tree", "--name-only", "main").split() for n in (1, 2, 3, 4))


def test_the_target_moved_by_someone_else_mid_queue(tmp_path, reference):
    world = World(tmp_path, speculate=4)
    process = world.start()
    deadline = time.monotonic() + 120
    def speculating() -> list[dict]:  # verifications started before the ones ahead of them had a verdict
        return [e["payload"] for e in world.events("IntegrationVerificationStarted") if e["payload"]["assumed"]]

    while time.monotonic() < deadline and not speculating():
        time.sleep(0.1)
    assert process.poll() is None, process.communicate()
    # status says what is being checked on what (unless that check ended meanwhile: it sleeps 3 s)
    second = speculating()[0]
    status = world.run("status", RUN).stdout
    decided = {e["payload"]["verification_binding"] for e in world.events(
        "IntegrationStepVerified", "IntegrationStepRejected", "IntegrationVerificationCancelled")}
    assert (f"checking on the merge of step {second['last_step']}, assuming step" in status
            or second["verification_binding"] in decided), status
    # someone pushes a commit onto main (compare-and-swap, as git push does) while verifications are in flight
    old = world.git("rev-parse", "main")
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=world.repo, input="theirs\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    tree = subprocess.run(["git", "mktree"], cwd=world.repo, capture_output=True, text=True, check=True,
                          input=world.git("ls-tree", old) + f"\n100644 blob {blob}\tTHEIRS.txt\n").stdout.strip()
    theirs = world.git("commit-tree", tree, "-p", old, "-m", "theirs")
    world.git("update-ref", "refs/heads/main", theirs, old)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err + out
    assert json.loads(out)["outcome"] == "delivered"
    assert world.events("IntegrationTargetMovedByOthers") and world.events("IntegrationRequeued")
    assert subprocess.run(["git", "merge-base", "--is-ancestor", theirs, "main"], cwd=world.repo).returncode == 0
    files = set(world.git("ls-tree", "--name-only", "main").split())
    assert {"THEIRS.txt", *(f"t{n}.sh" for n in range(1, TASKS + 1) if n != RENAMER)} <= files
    # nothing verified on the old target was passed off as verified on the new one: what did not land was redone
    landed = {e["payload"]["tree"] for e in world.events("IntegrationCompleted")}
    assert landed <= {e["payload"]["tree"] for e in world.events("IntegrationStepVerified", "IntegrationBatchVerified")}
    assert world.run("verify").returncode == 0
    assert_every_verification_settled(world)


def verdicts(world: World) -> list[dict]:
    """The check results that say what the check found (one stopped by docket's death or by a cancelled
    speculation says nothing, and runs again where it is still wanted)."""
    return [e for e in world.events("CheckPassed", "CheckFailed", "CheckTimedOut")
            if e["payload"].get("code") not in ("interrupted", "speculation-cancelled")]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3])
def test_killed_at_random_moments_during_speculation_then_resumed_delivers_the_same_tree(tmp_path, reference, seed):
    chance = random.Random(seed)
    world = World(tmp_path, speculate=4)
    kills = 0
    while kills < 4:
        process = world.start() if kills == 0 else world.start("go", "--resume", RUN, "--json")
        time.sleep(chance.uniform(3.0, 10.0))
        if process.poll() is not None:
            out, err = process.communicate()
            assert process.returncode == 0, err + out
            break
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        kills += 1
    assert_converged(world, reference)


SPECULATION_POINTS = ["integrate:after-speculation-started", "integrate:before-rejected"]


@pytest.mark.slow
@pytest.mark.parametrize("point", SPECULATION_POINTS)
def test_killed_at_a_point_of_a_speculation_then_resumed_delivers_the_same_tree(tmp_path, reference, point):
    """SIGKILLed at the first speculation recorded started (its checks not started), or as task 5's failing
    verdict was about to be recorded (the steps behind it merged and checked meanwhile): the resumed run starts a
    thread for each verification the ledger says runs, reuses what was recorded, and does nothing twice."""
    world = World(tmp_path, speculate=4)
    crashed = world.run(*world.go_args(), fault=point)
    assert crashed.returncode == -signal.SIGKILL, (point, crashed.returncode, crashed.stderr)
    if point == "integrate:before-rejected":  # killed with verifications in flight behind the failing one
        assert overlapped(world)
    assert_converged(world, reference)


def assert_converged(world: World, reference: str) -> None:
    done = world.run("go", "--resume", RUN, "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.tree() == reference
    assert world.run("verify").returncode == 0
    # nothing recorded was done twice: one result per check and candidate, one merge per step, one verdict per
    # range, one receipt
    results = Counter((e["payload"]["binding_id"], e["payload"]["check"]) for e in verdicts(world))
    assert max(results.values()) == 1
    assert max(Counter(e["payload"]["step"] for e in world.events("IntegrationStepMerged")).values()) == 1
    verdict_steps = Counter(e["payload"]["step"] for e in world.events("IntegrationStepVerified",
                                                                         "IntegrationStepRejected"))
    assert max(verdict_steps.values()) == 1
    started = Counter(e["payload"]["verification_binding"] for e in world.events("IntegrationVerificationStarted"))
    assert max(started.values()) == 1
    assert [e["payload"]["task_id"] for e in world.events("IntegrationStepRejected")] == [f"{RUN}.t5"]
    assert len(world.events("ReceiptSealed")) == 1
    assert_every_verification_settled(world)
