"""Two `docket go` runs on one target, in two processes, started together: the run whose target move finds the
target moved by the other re-queues its verified work onto the moved target (re-merged, re-verified, the target
moved by compare-and-swap) instead of stopping; both runs deliver, both receipts verify, and the target's history
has every task's merge. Work that conflicts with the other run's is that task's conflict: the rest is delivered.

The check makes the race certain rather than likely: run B's re-verification of a tree it has checked before (its
merge onto the base it started from) waits until run A's work is on the target, and run A's checks wait until B's
queue has moved its integration ref, so B's queue opened on the old target and A moves it first."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world, unsandboxed, wait_until

GATE = r'''
import os, subprocess, sys, time
repo, counts = sys.argv[1], sys.argv[2]
if os.path.exists(os.path.join(counts, "open")):  # no race to make certain
    sys.exit(0)
b_alone = os.path.exists("beta.txt") and not os.path.exists("alpha.txt")
seen = os.path.join(counts, "b-alone")
again = b_alone and os.path.exists(seen)
if b_alone:
    open(seen, "a").close()

def wait(argv):
    end = time.monotonic() + 60
    while subprocess.run(argv, cwd=repo, capture_output=True).returncode != 0:
        if time.monotonic() > end:
            sys.exit("gave up waiting for " + " ".join(argv))
        time.sleep(0.1)

if os.path.exists("alpha.txt"):  # run A's work: not before run B's queue has merged a step on the old target
    wait(["git", "show-ref", "--verify", "-q", "refs/docket/integrations/rb"])
elif again:  # run B re-verifying its merge onto the old target: not before run A has moved the target
    wait(["git", "cat-file", "-e", "main:alpha.txt"])
'''

ALPHA = '''\
[[tasks]]
id = "alpha"
title = "alpha"
prompt = """write alpha.txt: alpha
append notes.txt: alpha
"""
'''

BETA = '''\
[[tasks]]
id = "beta"
title = "beta"
prompt = "write beta.txt: beta"

[[tasks]]
id = "gamma"
title = "gamma"
prompt = "write gamma.txt: gamma"
'''

BETA_CONFLICTING = '''\
[[tasks]]
id = "beta"
title = "beta"
prompt = """write beta.txt: beta
append notes.txt: beta
"""

[[tasks]]
id = "gamma"
title = "gamma"
prompt = "write gamma.txt: gamma"
'''


def _world(tmp_path: Path, beta: str) -> tuple[GoWorld, Path]:
    counts = tmp_path / "counts"
    counts.mkdir()
    gate = tmp_path / "gate.py"
    gate.write_text(GATE)
    world = make_go_world(tmp_path, tasks=ALPHA, idle_timeout="2m")
    (world.repo / "docket.toml").write_text(unsandboxed((world.repo / "docket.toml").read_text()) + f'''
[checks.gate]
command = ["{sys.executable}", "{gate}", "{world.repo}", "{counts}"]
timeout = "2m"
''')
    (world.repo / "beta.toml").write_text(beta)
    (world.repo / ".gitignore").write_text("tasks.toml\nbeta.toml\n")
    (world.repo / "notes.txt").write_text("notes\n")
    (world.repo / "m.py").write_text("x = 1\n")  # for the world's compiles check
    git(world.repo, "add", "docket.toml", ".gitignore", "notes.txt", "m.py")
    git(world.repo, "commit", "-q", "-m", "the gate")
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    return world, keys


def _both(world: GoWorld, keys: Path) -> tuple[dict, dict]:
    common = ("--target", "main", "--key", f"{keys}.key", "--json")
    a = world.start("go", "--goal", "alpha", "--tasks", "tasks.toml", "--id", "ra", *common)
    b = world.start("go", "--goal", "beta", "--tasks", "beta.toml", "--id", "rb", "--parallel", "1", *common)
    try:
        out_a, err_a = a.communicate(timeout=300)
        out_b, err_b = b.communicate(timeout=300)
    finally:
        for process in (a, b):
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert a.returncode == 0, (out_a, err_a)
    return json.loads(out_a), {"returncode": b.returncode, "stderr": err_b, **json.loads(out_b)}


def _receipt_verifies(world: GoWorld, summary: dict, keys: Path) -> dict:
    verified = world.run("verify-receipt", summary["receipt"]["path"], "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    sealed = [e["payload"]["receipt"] for e in world.events("ReceiptSealed")
              if e["payload"]["run_id"] == summary["run_id"]]
    assert len(sealed) == 1
    return sealed[0]


def _merged_tasks(world: GoWorld) -> list[str]:
    """The tasks whose merge the target's first-parent line has, oldest first."""
    log = git(world.repo, "log", "--first-parent", "--format=%s", "main")
    return [line.split("integrate task ")[1].split(" ")[0] for line in reversed(log.splitlines())
            if "integrate task " in line]


def test_two_runs_on_one_target_both_deliver_the_second_re_queued_onto_the_first(tmp_path):
    world, keys = _world(tmp_path, BETA)
    a, b = _both(world, keys)
    assert b["returncode"] == 0, b
    assert [row["result"] for row in a["tasks"]] == ["delivered"]
    assert [row["result"] for row in b["tasks"]] == ["delivered", "delivered"]
    for name in ("alpha", "beta", "gamma"):
        assert world.file_at("main", f"{name}.txt") == f"{name}\n"
    assert sorted(_merged_tasks(world)) == ["ra.alpha", "rb.beta", "rb.gamma"]
    # B's move found the target moved by A, a docket run of this ledger: re-queued, not passed off as a stranger's
    (requeued,) = [e["payload"] for e in world.events("IntegrationRequeued")]
    alpha_at = world.events("IntegrationCompleted")[0]["payload"]
    assert (requeued["run_id"], requeued["onto"], requeued["moved_by"]) == ("rb", alpha_at["commit"], ["ra"])
    assert world.events("IntegrationTargetMovedByOthers") == []
    receipt_a = _receipt_verifies(world, a, keys)
    receipt_b = _receipt_verifies(world, b, keys)
    assert receipt_a["target"]["base"] == receipt_a["target"]["expected_commit"]
    assert receipt_b["target"]["base"] == alpha_at["commit"]  # where B's work was finally merged onto
    assert receipt_b["target"]["moved_by_others"]["moved"] is False  # A's merges are docket's, not foreign
    assert receipt_b["target"]["final_commit"] == git(world.repo, "rev-parse", "main")
    assert world.run("verify").returncode == 0
    fsck = world_fsck(world)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_a_task_whose_work_conflicts_with_the_other_runs_ends_in_conflict_and_the_rest_is_delivered(tmp_path):
    world, keys = _world(tmp_path, BETA_CONFLICTING)
    a, b = _both(world, keys)
    assert [row["result"] for row in a["tasks"]] == ["delivered"]
    by_task = {row["task"]: row for row in b["tasks"]}
    assert by_task["gamma"]["result"] == "delivered"
    beta = by_task["beta"]
    assert beta["result"] == "undelivered" and beta["code"] == "integration-conflict", beta
    assert [c["paths"] for c in beta["conflicts"]] == [["notes.txt"]]
    assert b["returncode"] == 6, b  # delivered in part
    assert world.file_at("main", "notes.txt") == "notes\nalpha\n"
    assert world.file_at("main", "gamma.txt") == "gamma\n"
    receipt_b = _receipt_verifies(world, b, keys)
    assert [t["task_id"] for t in receipt_b["undelivered"]] == ["rb.beta"]
    assert receipt_b["undelivered"][0]["paths"] == ["notes.txt"]
    assert [t["task_id"] for t in receipt_b["tasks"]] == ["rb.gamma"]
    _receipt_verifies(world, a, keys)
    assert world.run("verify").returncode == 0
    fsck = world_fsck(world)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def world_fsck(world: GoWorld):
    import subprocess

    return subprocess.run(["git", "fsck", "--strict"], cwd=world.repo, capture_output=True, text=True)


def test_killed_once_the_target_was_found_moved_the_resumed_run_re_queues_and_delivers(tmp_path):
    """SIGKILL right after IntegrationTargetMoved was recorded (before who moved it is): the resumed run records it
    and re-queues, once, and delivers."""
    world, keys = _world(tmp_path, BETA)
    common = ("--target", "main", "--key", f"{keys}.key", "--json")
    a = world.start("go", "--goal", "alpha", "--tasks", "tasks.toml", "--id", "ra", *common)
    env = dict(world.env, DOCKET_FAULT="effector:after-outcome@IntegrationTargetRequested.v2")
    import subprocess

    b = subprocess.run(world.argv("go", "--goal", "beta", "--tasks", "beta.toml", "--id", "rb", "--parallel", "1",
                                  *common), cwd=world.repo, env=env, capture_output=True, text=True, timeout=300)
    out_a, err_a = a.communicate(timeout=300)
    assert a.returncode == 0, (out_a, err_a)
    assert b.returncode == -9, b.stdout + b.stderr
    moved = [e["payload"] for e in world.events("IntegrationTargetMoved") if e["payload"]["run_id"] == "rb"]
    assert [m["code"] for m in moved] == ["target-moved"] and world.events("IntegrationRequeued") == []
    resumed = world.resume("rb")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(world.events("IntegrationRequeued")) == 1 and world.events("IntegrationTargetMovedByOthers") == []
    for name in ("alpha", "beta", "gamma"):
        assert world.file_at("main", f"{name}.txt") == f"{name}\n"
    _receipt_verifies(world, json.loads(resumed.stdout), keys)
    assert world.run("verify").returncode == 0
    fsck = world_fsck(world)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_a_queue_opened_on_a_target_another_run_moved_since_its_base_is_not_passed_off_as_a_strangers(tmp_path):
    world, keys = _world(tmp_path, "")
    (tmp_path / "counts" / "open").write_text("")
    (world.repo / "later.toml").write_text('''
[[tasks]]
id = "later"
title = "later"
prompt = """wait for go.flag
delete go.flag
write later.txt: later
"""
''')
    common = ("--target", "main", "--key", f"{keys}.key", "--json")
    base = git(world.repo, "rev-parse", "main")
    b = world.start("go", "--goal", "later", "--tasks", "later.toml", "--id", "rb", *common)
    try:
        def worktree() -> str | None:
            made = [e["payload"]["path"] for e in world.events("WorktreeCreated")
                    if e["payload"]["task_id"] == "rb.later"]
            return made[0] if made else None

        assert wait_until(lambda: worktree() is not None, timeout=60)  # B's base is pinned: A may move the target
        a = world.run("go", "--goal", "alpha", "--tasks", "tasks.toml", "--id", "ra", *common)
        assert a.returncode == 0, a.stdout + a.stderr
        (Path(worktree()) / "go.flag").write_text("go\n")
        out, err = b.communicate(timeout=300)
    finally:
        if b.poll() is None:
            b.kill()
            b.communicate()
    assert b.returncode == 0, out + err
    (pinned,) = [e["payload"] for e in world.events("RunBasePinned") if e["payload"]["run_id"] == "rb"]
    assert pinned["commit"] == base  # B was based before A moved the target
    (opened,) = [e["payload"] for e in world.events("IntegrationPrepared") if e["payload"]["run_id"] == "rb"]
    assert opened["expected_commit"] != base and git(world.repo, "show", f"{opened['expected_commit']}:alpha.txt")
    assert world.events("IntegrationTargetMovedByOthers") == []  # A is a docket run of this ledger
    receipt = _receipt_verifies(world, json.loads(out), keys)
    assert receipt["target"]["moved_by_others"]["moved"] is False
    assert world.file_at("main", "later.txt") == "later\n" and world.file_at("main", "alpha.txt") == "alpha\n"


MOVER = r'''
import os, subprocess, sys
repo, counts = sys.argv[1], sys.argv[2]
if os.path.exists(os.path.join(counts, "calm")):
    sys.exit(0)
n = len(os.listdir(counts))
open(os.path.join(counts, f"run-{n}"), "w").close()
git = lambda *a: subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True, check=True).stdout.strip()
old = git("rev-parse", "main")
new = git("commit-tree", "main^{tree}", "-p", "main", "-m", f"someone else's commit {n}")
git("update-ref", "refs/heads/main", new, old)
'''


@pytest.mark.slow  # a dozen re-verifications
def test_a_target_that_keeps_moving_is_followed_a_bounded_number_of_times_then_the_run_waits_and_resumes(tmp_path):
    """Someone commits on top of the target every time a check runs (here, the check itself): each target move finds
    it moved, the queue re-queues onto it; after its rounds the run waits (target-keeps-moving, exit 8), and once the
    target is left alone `docket go --resume` delivers on top of everything, every commit recorded as foreign."""
    counts = tmp_path / "counts"
    counts.mkdir()
    mover = tmp_path / "mover.py"
    mover.write_text(MOVER)
    world = make_go_world(tmp_path, tasks='[[tasks]]\nid = "one"\ntitle = "one"\nprompt = "write one.py: ONE = 1"\n')
    (world.repo / "docket.toml").write_text(unsandboxed((world.repo / "docket.toml").read_text()) + f'''
[checks.mover]
command = ["{sys.executable}", "{mover}", "{world.repo}", "{counts}"]
''')
    git(world.repo, "commit", "-q", "-am", "the mover")
    done = world.run("go", "--goal", "one", "--tasks", "tasks.toml", "--id", "km", "--json")
    assert done.returncode == 8, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["waiting"]["code"] == "target-keeps-moving", summary["waiting"]
    rounds = [e["payload"]["round"] for e in world.events("IntegrationRequeued")]
    assert rounds == list(range(1, len(rounds) + 1)) and 5 <= len(rounds) <= 10  # bounded per command
    assert world.events("ReceiptSealed") == []
    (counts / "calm").write_text("")
    resumed = world.resume("km")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert world.file_at("main", "one.py") == "ONE = 1\n"
    moved = world.events("IntegrationTargetMovedByOthers")
    assert len(moved) == len(world.events("IntegrationRequeued")) + 1  # each round's stranger, and the queue's opening
    (sealed,) = [e["payload"]["receipt"] for e in world.events("ReceiptSealed")]
    assert sealed["target"]["base"] == git(world.repo, "rev-parse", "main^")
    assert len(sealed["target"]["moved_by_others"]["commits"]) == len(os.listdir(counts)) - 1
    assert world.run("verify").returncode == 0


def test_a_run_starting_beside_another_leaves_the_others_launch_in_flight_alone(tmp_path):
    """Found by the two-run test: a `docket go` that starts (or resumes) converges what a crash left of *its* run;
    it drove every pending intent of the ledger, so another live run's launch, recorded and not yet started, was
    found with no launcher here and recorded launcher-gone, failing that run's task."""
    import signal
    import subprocess

    world, keys = _world(tmp_path, BETA)
    (tmp_path / "counts" / "open").write_text("")
    common = ("--target", "main", "--key", f"{keys}.key", "--json")
    env = dict(world.env, DOCKET_FAULT="pause:effector:before-observe@WorkerLaunchRequested.v1")
    a = subprocess.Popen(world.argv("go", "--goal", "alpha", "--tasks", "tasks.toml", "--id", "ra", *common),
                         cwd=world.repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import psutil

        assert wait_until(lambda: psutil.Process(a.pid).status() == psutil.STATUS_STOPPED, timeout=60)
        assert [e["payload"]["worker_id"] for e in world.events("WorkerLaunchRequested")] == ["ra.alpha"]
        b = world.run("go", "--goal", "beta", "--tasks", "beta.toml", "--id", "rb", *common)
        assert b.returncode == 0, b.stdout + b.stderr
    finally:
        a.send_signal(signal.SIGCONT)
    out, err = a.communicate(timeout=300)
    assert world.events("WorkerLaunchFailed") == []
    assert a.returncode == 0, out + err
    for name in ("alpha", "beta", "gamma"):
        assert world.file_at("main", f"{name}.txt") == f"{name}\n"
