"""Merged work is released: after `docket go` delivered, `gc` drops the candidates and task worktrees whose work is in
the target's history, and keeps what the target does not hold (an undelivered task, a target reset by hand).

Real repositories, the scripted agent, the real CLI; real git agrees afterwards.
"""

from __future__ import annotations

from docket.adapters.world.files.paths import task_worktree_path
import subprocess
from pathlib import Path

import pytest

from ..conftest import git, listed_places
from .go_world import GoWorld, make_go_world

RUN = "r1"


def refs(world: GoWorld) -> set[str]:
    return set(git(world.repo, "for-each-ref", "--format=%(refname)", "refs/docket/candidates/").splitlines())


def listed_worktrees(world: GoWorld) -> set[str]:
    return set(listed_places(world.repo))


def worktree(world: GoWorld, task: str) -> Path:
    return task_worktree_path(world.repo / ".git", RUN, f"{RUN}.{task}")


def candidates(world: GoWorld) -> dict[str, dict]:
    return {c["binding_id"]: c for c in world.json("candidate", "list", RUN)["candidates"]}


def assert_git_clean(repo: Path) -> None:
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stderr.lower(), fsck.stdout + fsck.stderr
    assert subprocess.run(["git", "worktree", "prune", "-n", "-v"], cwd=repo, capture_output=True,
                          text=True).stdout.strip() == ""


@pytest.fixture
def delivered(tmp_path: Path) -> tuple[GoWorld, dict]:
    """A go run with one cycle: greet and shout are delivered, name fails its check and is not."""
    world = make_go_world(tmp_path, target="trunk")
    done = world.go(RUN, "--target", "trunk", "--cycles", "1")
    summary = __import__("json").loads(done.stdout)
    results = {t["task"]: t["result"] for t in summary["tasks"]}
    assert results == {"greet": "delivered", "name": "failed", "shout": "delivered"}, done.stdout + done.stderr
    return world, summary


def test_gc_after_go_removes_delivered_candidates_and_worktrees_and_keeps_the_undelivered(delivered):
    world, summary = delivered
    pinned = candidates(world)
    undelivered = {b for b, c in pinned.items() if c["task_id"] == f"{RUN}.name"}
    assert len(undelivered) == 1 and len(pinned) > 3  # greet, shout and the merge queue's verifications
    target = git(world.repo, "rev-parse", "trunk")

    listed = world.json("gc")
    actions = {(i["kind"], i["name"]): i["action"] for i in listed["items"] if i["kind"] in ("candidate", "worktree")}
    assert actions == {**{("candidate", b): "keep" if b in undelivered else "remove" for b in pinned},
                       ("worktree", f"{RUN}.greet"): "remove", ("worktree", f"{RUN}.shout"): "remove",
                       ("worktree", f"{RUN}.name"): "keep"}, listed
    assert refs(world) == {c["ref"] for c in pinned.values()}  # without --apply nothing goes

    applied = world.json("gc", "--apply")
    actions = {(i["kind"], i["name"]): i["action"] for i in applied["items"] if i["kind"] in ("candidate", "worktree")}
    assert {name for (kind, name), action in actions.items() if action == "removed"} == \
        (set(pinned) - undelivered) | {f"{RUN}.greet", f"{RUN}.shout"}, applied
    assert refs(world) == {pinned[b]["ref"] for b in undelivered}
    assert not worktree(world, "greet").exists() and not worktree(world, "shout").exists()
    assert str(worktree(world, "greet")) not in listed_worktrees(world)
    assert (worktree(world, "name") / "name.py").read_text() == "NAME = broken\n"  # the failed work stays
    assert str(worktree(world, "name")) in listed_worktrees(world)
    assert git(world.repo, "rev-parse", "trunk") == target
    assert world.file_at("trunk", "greet.py") == 'print("hello")\nprint("HELLO")\n'
    assert_git_clean(world.repo)
    # every release went through the ledger, each saying why the work is kept
    released = world.events("CandidateReleaseRequested")
    assert {e["payload"]["binding_id"] for e in released} == set(pinned) - undelivered
    assert all("trunk" in e["payload"]["reason"] for e in released), released
    assert {e["payload"]["binding_id"] for e in world.events("CandidateReleased")} == set(pinned) - undelivered
    assert {e["payload"]["task_id"] for e in world.events("WorktreeRemoved")} == {f"{RUN}.greet", f"{RUN}.shout"}

    again = world.json("gc", "--apply")
    assert not [i for i in again["items"] if i["action"] in ("remove", "removed")], again
    human = world.run("gc").stdout
    assert "keep" in human and "trunk" in human


def test_a_delivered_candidate_is_released_without_discard_when_the_target_holds_it(delivered):
    world, summary = delivered
    (greet,) = [t["candidate"] for t in summary["tasks"] if t["task"] == "greet"]
    (worktree(world, "greet") / "later.txt").write_text("work after the delivery\n")  # the worktree moved on

    released = world.json("candidate", "release", greet)
    assert released["result"] == "released"
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", released["ref"]], cwd=world.repo,
                          capture_output=True).returncode != 0
    (intent,) = [e for e in world.events("CandidateReleaseRequested") if e["payload"]["binding_id"] == greet]
    assert "kept:" in intent["payload"]["reason"] and "trunk" in intent["payload"]["reason"], intent
    # the worktree's later work is no candidate's: gc keeps it
    kept = world.json("gc", "--apply")
    (item,) = [i for i in kept["items"] if i["kind"] == "worktree" and i["name"] == f"{RUN}.greet"]
    assert item["action"] == "keep" and "later.txt" in item["reason"], item
    assert (worktree(world, "greet") / "later.txt").exists()


def test_a_candidate_the_target_no_longer_reaches_is_kept(delivered):
    world, summary = delivered
    base = git(world.repo, "rev-parse", "main")
    git(world.repo, "update-ref", "refs/heads/trunk", base)  # the user resets the target back
    pinned = candidates(world)

    kept = world.json("gc", "--apply")
    base = {b["binding_id"] for b in summary["base_checks"].values()}  # the run's base, pinned for its checks: no work
    items = [i for i in kept["items"] if i["kind"] in ("candidate", "worktree") and i["name"] not in base]
    assert items and all(i["action"] == "keep" for i in items), [i for i in items if i["action"] != "keep"]
    assert refs(world) == {c["ref"] for binding, c in pinned.items() if binding not in base}
    assert all(worktree(world, t).exists() for t in ("greet", "name", "shout"))
    (greet,) = [t["candidate"] for t in summary["tasks"] if t["task"] == "greet"]
    (worktree(world, "greet") / "later.txt").write_text("work after the delivery\n")
    refused = world.run("candidate", "release", greet)
    assert refused.returncode == 3 and "unpreserved-candidate" in refused.stderr, refused.stderr
    assert [e for e in world.events("CandidateReleaseRequested") if e["payload"]["binding_id"] not in base] == []
