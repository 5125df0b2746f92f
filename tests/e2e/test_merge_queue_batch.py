"""[integration] batch under `docket go`: the required checks run once on the merged result of up to N steps, a failing
batch is bisected to the step that breaks it (its task repaired on the verified head) while the rest land; killed at
each new point or at random moments, `docket go --resume` runs no recorded check again and delivers the same tree.

The world (bench/batch.py's, at a small size): six tasks with a one-line sh agent; task 2 adds a script that calls
lib.sh's greet, task 5 renames greet to hello in lib.sh and in every t*.sh it finds. Each passes its own check; merged
after task 2, task 5 breaks the suite, and its repair (from the integrated head, which has t2.sh) renames there too.
"""

from __future__ import annotations

import json
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

TASKS, CALLER, RENAMER = 6, 2, 5
RUN = "batch"


class World:
    def __init__(self, tmp_path: Path, batch: int):
        self.repo = make_repository(tmp_path / "repo", batch)
        self.tasks = tasks_file(tmp_path / "tasks.toml", TASKS, CALLER, RENAMER)
        self.env = {k: v for k, v in __import__("os").environ.items()
                    if not k.startswith("DOCKET_") and k != "PYTHONDONTWRITEBYTECODE"}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "docket", *args]

    def go_args(self) -> list[str]:
        return ["go", "--goal", "bench", "--tasks", str(self.tasks), "--target", "main", "--parallel", "1",
                "--id", RUN, "--cycles", "3", "--json"]

    def run(self, *args: str, fault: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = dict(self.env, **({"DOCKET_FAULT": fault} if fault else {}))
        return subprocess.run(self.argv(*args), cwd=self.repo, env=env, capture_output=True, text=True,
                              timeout=timeout)

    def start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*self.go_args()), cwd=self.repo, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def events(self, *types: str) -> list[dict]:
        return [e for e in logged_events(self.repo / ".git" / "docket" / "ledger.sqlite")
                if e["type"].split(".")[0] in types]

    def tree(self) -> str:
        return subprocess.run(["git", "rev-parse", "main^{tree}"], cwd=self.repo, capture_output=True, text=True,
                              check=True).stdout.strip()


def ranges(world: World) -> list[tuple[int, int, str]]:
    made = []
    for e in world.events("IntegrationBatchVerified", "IntegrationBatchFailed", "IntegrationStepVerified",
                          "IntegrationStepRejected"):
        p, kind = e["payload"], e["type"].split(".")[0]
        first, last = (p["first_step"], p["last_step"]) if "Batch" in kind else (p["step"], p["step"])
        made.append((first, last, "passed" if kind.endswith("Verified") else "failed"))
    return made


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tree an uninterrupted run with one check per step delivers."""
    world = World(tmp_path_factory.mktemp("per-step"), 1)
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    return world.tree()


def test_a_batch_is_checked_once_and_a_failing_one_bisected_to_the_step_that_breaks_it(tmp_path, reference):
    world = World(tmp_path, 4)
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.tree() == reference
    found = ranges(world)
    # 1..4 together; 5..6 fail together; 5 alone fails: rejected; 6 queued again with 5's repair
    assert found[:3] == [(1, 4, "passed"), (5, 6, "failed"), (5, 5, "failed")]
    assert all(result == "passed" for *_, result in found[3:])
    (requeued,) = world.events("IntegrationBatchRequeued")
    assert (requeued["payload"]["rejected_step"], requeued["payload"]["requeued"]) == (5, [6])
    # the culprit's feedback: the failing check, and what it was merged onto
    (feedback,) = [e["payload"] for e in world.events("TaskFeedbackRecorded") if e["payload"]["task_id"] == "batch.t5"]
    assert feedback["code"] == "integration-rejected"
    verified = [e for e in world.events("IntegrationBatchVerified") if e["payload"]["first_step"] == 1][0]
    head = [e["payload"]["merge_commit"] for e in world.events("IntegrationStepMerged")
            if e["payload"]["step"] == 4][0]
    assert "check suite failed on the merge of step 5 (task batch.t5)" in feedback["feedback"]
    assert head in feedback["feedback"] and "batch.t2" in feedback["feedback"]
    assert verified["payload"]["tasks"] == ["batch.t1", "batch.t2", "batch.t3", "batch.t4"]
    # the target only ever moved to merges the checks passed on
    checked = {e["payload"]["tree"] for e in world.events("IntegrationBatchVerified", "IntegrationStepVerified")}
    assert {e["payload"]["tree"] for e in world.events("IntegrationCompleted")} <= checked
    # status shows the batch, and the receipt verifies offline
    status = world.run("status", RUN).stdout
    assert "verified with steps 1..4 by one check run" in status
    keys = tmp_path / "k"
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    assert world.run("export", RUN, "--key", f"{keys}.key", "--out", str(tmp_path / "r.jsonl")).returncode == 0
    checked_receipt = world.run("verify-receipt", str(tmp_path / "r.jsonl"), "--key", f"{keys}.pub")
    assert checked_receipt.returncode == 0, checked_receipt.stderr
    sealed = world.events("ReceiptSealed")[0]["payload"]["receipt"]
    steps = {s["step"]: s for s in sealed["integration"]["steps"]}
    assert steps[2]["batch"]["first_step"] == 1 and steps[2]["batch"]["last_step"] == 4
    assert steps[6]["status"] == "requeued" and steps[6]["requeued_after"] == 5
    assert_forged_batch_claims_are_caught(world, tmp_path / "r.jsonl", keys)


def assert_forged_batch_claims_are_caught(world: World, bundle: Path, keys: Path) -> None:
    """A forger holding the key re-signs the receipt with a batch claim changed: verify-receipt names the lie."""
    import base64
    import copy

    from docket.adapters.world.ledger.signing import load_signer, sign_statement
    from docket.domain.reports.receipts import receipt_sha256

    lines = bundle.read_bytes().splitlines()
    original = json.loads(base64.b64decode(json.loads(lines[0])["payload"]))

    def forged(change) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
        value = copy.deepcopy(original)
        receipt = value["predicate"]["receipt"]
        change({s["step"]: s for s in receipt["integration"]["steps"]})
        value["predicate"]["receipt_sha256"] = receipt_sha256(receipt)
        envelope = sign_statement(value, load_signer(Path(f"{keys}.key")))
        path = bundle.with_name(f"forged-{random.random()}.jsonl")
        path.write_bytes(b"\n".join([json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode(),
                                      *lines[1:]]) + b"\n")
        return world.run("verify-receipt", str(path), "--key", f"{keys}.pub")

    def unbatched(steps: dict) -> None:  # step 2 checked on its own merge: it was not
        del steps[2]["batch"]

    def widened(steps: dict) -> None:  # the batch check stretched over the rejected step
        steps[2]["batch"]["last_step"] = 5

    def culprit_verified(steps: dict) -> None:  # the rejected step claimed verified by the passing batch
        steps[5].update(status="verified", code=None, batch=dict(steps[2]["batch"]),
                        verification_binding=steps[2]["verification_binding"],
                        verification_commit=steps[2]["verification_commit"], checks=steps[2]["checks"])

    def requeued_elsewhere(steps: dict) -> None:
        steps[6]["requeued_after"] = 4

    for change in (unbatched, widened, culprit_verified, requeued_elsewhere):
        done = forged(change)
        assert done.returncode != 0 and "receipt-contradicts-event" in done.stderr, (change.__name__, done.stderr)


def test_docket_integrate_checks_a_fixed_queue_in_batches(tmp_path):
    """Without the queue going on (approval required: integrated at the end, in task order, by the fixed queue)."""
    world = World(tmp_path, 3)
    config = world.repo / "docket.toml"
    config.write_text(config.read_text() + "approval = true\n")
    waiting = world.run(*world.go_args())
    assert waiting.returncode == 8, waiting.stderr  # waits for approval
    assert world.run("approve", RUN, "--by", "me").returncode == 0
    done = world.run("integrate", RUN, "--json")
    assert done.returncode == 3, done.stderr  # the fixed queue stops at the culprit
    assert "step-rejected" in done.stderr
    assert ranges(world) == [(1, 3, "passed"), (4, 6, "failed"), (4, 4, "passed"), (5, 5, "failed")]
    document = json.loads(done.stdout)
    assert [s["status"] for s in document["steps"]] == ["verified"] * 4 + ["rejected", "merged"]
    assert document["steps"][0]["batch"] == [1, 3]
    text = world.run("integrate", RUN).stdout
    assert "checks passed (with steps 1..3, by one check run on step 3's merge)" in text
    assert "not checked: the queue stopped before its batch's check" in text and "bisected" not in text
    assert "bisecting" not in world.run("status", RUN).stdout  # the culprit was found


def verdicts(world: World) -> list[dict]:
    """The check results that say what the check found (a check docket's own death interrupted is recorded failed,
    code interrupted, and run again: not a result of the check)."""
    return [e for e in world.events("CheckPassed", "CheckFailed", "CheckTimedOut")
            if e["payload"].get("code") != "interrupted"]


def assert_converged(world: World, reference: str) -> None:
    done = world.run("go", "--resume", RUN, "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.tree() == reference
    assert world.run("verify").returncode == 0
    # nothing recorded was done twice: one result per check and candidate, no check asked for after its result,
    # one merge per step, each batch verdict once
    results = Counter((e["payload"]["binding_id"], e["payload"]["check"]) for e in verdicts(world))
    assert max(results.values()) == 1
    merged = Counter(e["payload"]["step"] for e in world.events("IntegrationStepMerged"))
    assert max(merged.values()) == 1
    batch_verdicts = Counter((e["type"], e["payload"]["first_step"], e["payload"]["last_step"])
                             for e in world.events("IntegrationBatchVerified", "IntegrationBatchFailed"))
    assert max(batch_verdicts.values()) == 1
    rejected = [e["payload"]["task_id"] for e in world.events("IntegrationStepRejected")]
    assert rejected == ["batch.t5"]
    assert len(world.events("ReceiptSealed")) == 1


def checks_after_results(world: World) -> list[tuple[str, str]]:
    """(binding, check) pairs asked for again after a result of theirs was recorded."""
    counted = {e["position"] for e in verdicts(world)}
    seen, again = set(), []
    for e in world.events("CheckRequested", "CheckPassed", "CheckFailed", "CheckTimedOut"):
        key = (e["payload"]["binding_id"], e["payload"]["check"])
        if e["type"].startswith("CheckRequested") and key in seen:
            again.append(key)
        elif e["position"] in counted:
            seen.add(key)
    return again


BATCH_POINTS = [
    "integrate:after-step",
    "integrate:before-rejected",
    "integrate:after-batch-failed",
    "integrate:before-verified",
    "integrate:after-merge-computed",
    "effector:after-act@IntegrationStepRequested.v1",
    "check:before-result",
]


@pytest.mark.slow
@pytest.mark.parametrize("point", BATCH_POINTS)
def test_killed_at_a_point_of_a_batch_then_resumed_delivers_the_same_tree(tmp_path, reference, point):
    world = World(tmp_path, 4)
    crashed = world.run(*world.go_args(), fault=point)
    assert crashed.returncode == -signal.SIGKILL, (point, crashed.returncode, crashed.stderr)
    assert_converged(world, reference)
    assert checks_after_results(world) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_killed_at_random_moments_during_batches_then_resumed_delivers_the_same_tree(tmp_path, reference, seed):
    chance = random.Random(seed)
    world = World(tmp_path, 4)
    kills = 0
    while kills < 4:
        process = world.start() if kills == 0 else subprocess.Popen(
            world.argv("go", "--resume", RUN, "--json"), cwd=world.repo, env=world.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        time.sleep(chance.uniform(2.0, 9.0))
        if process.poll() is not None:
            out, err = process.communicate()
            assert process.returncode == 0, err + out
            break
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        kills += 1
    assert_converged(world, reference)
    assert checks_after_results(world) == []


def test_a_batch_that_a_dependent_task_waits_for_is_checked_without_waiting_to_fill(tmp_path):
    """t3 depends on t1: it starts only once t1's step is verified, so a batch of 4 would wait for ever for it; the
    batch is checked as soon as no task that could join it works."""
    world = World(tmp_path, 4)
    world.tasks.write_text(world.tasks.read_text().split('[[tasks]]\nid = "t4"')[0].replace(
        'id = "t3"\n', 'id = "t3"\ndepends_on = ["t1"]\n'))
    done = world.run(*world.go_args(), timeout=240)
    assert done.returncode == 0, done.stderr
    assert ranges(world) == [(1, 2, "passed"), (3, 3, "passed")]


def test_a_step_that_conflicts_with_an_open_batch_waits_for_the_batch_check_and_conflicts_with_verified_work(
        tmp_path):
    """t3 writes the file t1 wrote: merged onto the open batch (t1, t2) it conflicts. It is not dropped against
    unverified merges: the batch is checked first, then t3 is merged onto the verified head, conflicts there, and is
    repaired from that head (never from a merge the checks did not pass on)."""
    world = World(tmp_path, 4)
    lines = ["printf x > same.txt", "printf '. ./lib.sh\\ntrue\\n' > t2.sh", "printf y > same.txt",
             "printf '. ./lib.sh\\ntrue\\n' > t4.sh"]
    world.tasks.write_text("\n".join(f'[[tasks]]\nid = "t{n}"\ntitle = "task {n}"\nprompt = {json.dumps(line)}\n'
                                     for n, line in enumerate(lines, start=1)))
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    assert ranges(world)[0] == (1, 2, "passed")
    (conflict,) = world.events("IntegrationStepConflicted")
    verified_head = [e["payload"]["merge_commit"] for e in world.events("IntegrationStepMerged")
                     if e["payload"]["step"] == 2][0]
    assert (conflict["payload"]["step"], conflict["payload"]["head"]) == (3, verified_head)
    assert conflict["position"] > [e["position"] for e in world.events("IntegrationBatchVerified")][0]
    assert subprocess.run(["git", "show", "main:same.txt"], cwd=world.repo, capture_output=True,
                          text=True).stdout == "y"


def test_the_step_whose_merge_ended_a_failed_batch_is_rejected_on_that_check_run_not_a_new_one(tmp_path):
    """Task 4 renames what task 2 calls: the batch 1..4 fails on step 4's merge, 1..2 and 3 pass, and step 4 alone
    is rejected on the check run that already failed on its very merge (the more-itertools trial saw the same
    tree checked again)."""
    world = World(tmp_path, 4)
    world.tasks = tasks_file(tmp_path / "tasks.toml", 4, CALLER, 4)
    done = world.run(*world.go_args())
    assert done.returncode == 0, done.stderr
    assert ranges(world)[:4] == [(1, 4, "failed"), (1, 2, "passed"), (3, 3, "passed"), (4, 4, "failed")]
    (failed,) = world.events("IntegrationBatchFailed")
    (rejected,) = world.events("IntegrationStepRejected")
    assert rejected["payload"]["verification_binding"] == failed["payload"]["verification_binding"]
    assert rejected["payload"]["check_id"] == failed["payload"]["check_id"]
    pins = {e["payload"]["binding_id"] for e in world.events("CandidatePinRequested")
            if e["payload"]["boundary"] == "integration-4"}
    assert pins == {failed["payload"]["verification_binding"]}  # step 4 was never pinned (nor checked) alone
    keys = tmp_path / "k"
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    assert world.run("export", RUN, "--key", f"{keys}.key", "--out", str(tmp_path / "r.jsonl")).returncode == 0
    checked = world.run("verify-receipt", str(tmp_path / "r.jsonl"), "--key", f"{keys}.pub")
    assert checked.returncode == 0, checked.stderr
