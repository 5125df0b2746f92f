"""A run on a shared git remote ([git] remote = "origin"): the base is the remote's branch, every candidate is pushed
there create-only as part of its pin, and the target is moved there by compare-and-swap; a remote that moved is
never overwritten, a remote that cannot be reached leaves the effect waiting, and the clone's own branch is its
owner's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import DELIVERED, GoWorld, make_go_world, wait_until

REMOTE = '\n[git]\nremote = "origin"\n'


def _world_with_remote(tmp_path: Path) -> tuple[GoWorld, Path]:
    world = make_go_world(tmp_path, extra_config=REMOTE)
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(world.repo), str(remote))
    git(world.repo, "remote", "add", "origin", str(remote))
    return world, remote


def _refs(repository: Path, prefix: str) -> dict[str, str]:
    lines = git(repository, "for-each-ref", "--format=%(refname) %(objectname)", prefix).splitlines()
    return dict(line.split(" ", 1) for line in lines if line)


def _pinned(world: GoWorld) -> dict[str, str]:
    return {e["payload"]["ref"]: e["payload"]["commit"] for e in world.events("CandidatePinned")}


def test_go_delivers_on_the_remote_with_every_candidate_pushed_and_the_clone_left_to_its_owner(tmp_path):
    world, remote = _world_with_remote(tmp_path)
    base = git(world.repo, "rev-parse", "main")
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    done = world.go("r1", "--parallel", "3", "--key", f"{keys}.key")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "delivered"

    for path, text in DELIVERED.items():  # delivered on the remote
        assert git(remote, "show", f"main:{path}") + "\n" == text
    assert git(world.repo, "rev-parse", "main") == base  # the clone's branch is its owner's: git pull
    moves = world.events("IntegrationTargetRequested")  # the queue moves it as steps are verified
    assert moves and {(e["type"], e["payload"]["remote"], e["payload"]["checkout"]) for e in moves} == {
        ("IntegrationTargetRequested.v3", "origin", None)}
    completed = world.events("IntegrationCompleted")
    assert len(completed) == len(moves) and completed[-1]["payload"]["commit"] == git(remote, "rev-parse", "main")

    pinned = _pinned(world)
    assert pinned and all(ref.startswith("refs/docket/candidates/") for ref in pinned)
    on_remote = _refs(remote, "refs/docket/candidates/")
    worker_pins = {ref: commit for ref, commit in pinned.items() if ref in on_remote}
    assert worker_pins == {ref: on_remote[ref] for ref in worker_pins}  # the same commits, pushed
    requested = world.events("CandidatePinRequested")
    assert requested and {e["type"] for e in requested} == {"CandidatePinRequested.v2"}
    assert set(pinned) <= set(on_remote)  # every pin reached the remote before it was recorded as pinned

    replay = json.loads(world.run("replay", "--json").stdout)
    assert replay["drift"] == [] and replay["verified"]["ok"] is True

    # the receipt says where the target is, and verify-receipt holds it to the run's own record
    bundle = Path(summary["receipt"]["path"])
    verified = world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub", "--commit",
                         git(remote, "rev-parse", "main"))
    assert verified.returncode == 0, verified.stderr
    receipt = json.loads(world.run("seal", "r1", "--json").stdout)["receipt"]
    assert receipt["target"]["remote"] == {"name": "origin", "url": str(remote)}


def test_the_base_is_the_remote_branch_not_the_clone(tmp_path):
    """The clone is behind (another machine pushed): the run starts from what the remote has, fetched."""
    world, remote = _world_with_remote(tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    (other / "README.md").write_text("pushed from another machine\n")
    git(other, "-c", "user.name=o", "-c", "user.email=o@example.com", "commit", "-qam", "elsewhere")
    git(other, "push", "-q", "origin", "main")
    pushed = git(remote, "rev-parse", "main")
    assert git(world.repo, "rev-parse", "main") != pushed

    opened = world.json("run", "open", "--goal", "g", "--target", "main", "--id", "r1")
    assert opened["run"]["base_commit"] == pushed
    assert git(world.repo, "cat-file", "-t", pushed) == "commit"  # its objects fetched: tasks start from it here


def test_a_remote_moved_before_the_target_move_is_not_overwritten(tmp_path):
    """Someone pushes to the remote's main while the run integrates: the compare-and-swap finds it moved
    (IntegrationTargetMoved, nothing forced), the queue goes on from what the remote has, and the final target
    keeps the other push."""
    world, remote = _world_with_remote(tmp_path)
    killed = world.go("r1", "--parallel", "3", fault="integrate:before-target")
    assert killed.returncode == -9, killed.stderr
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    (other / "NOTES.md").write_text("someone else's work\n")
    git(other, "add", "NOTES.md")
    git(other, "-c", "user.name=o", "-c", "user.email=o@example.com", "commit", "-qm", "theirs")
    git(other, "push", "-q", "origin", "main")
    theirs = git(remote, "rev-parse", "main")

    done = world.resume("r1")
    assert done.returncode == 0, done.stderr
    moved = world.events("IntegrationTargetMoved")
    assert moved and moved[0]["payload"]["code"] == "target-moved" and moved[0]["payload"]["found"] == theirs
    git(remote, "merge-base", "--is-ancestor", theirs, "main")  # kept, not forced over
    assert git(remote, "show", "main:NOTES.md") == "someone else's work"
    for path, text in DELIVERED.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text


def test_an_unreachable_remote_leaves_the_pins_waiting_and_the_run_goes_on_when_it_returns(tmp_path):
    """The remote goes away while the agents work: each pin waits as unknown (recorded, nothing recorded as pinned
    that the remote does not have, no generation spent on it); once the remote is back the same `docket go` finishes
    the run, every candidate on the remote."""
    world, remote = _world_with_remote(tmp_path)
    killed = world.go("r1", "--parallel", "3", fault="go:before-launch")  # planned, based on the remote's main
    assert killed.returncode == -9, killed.stderr
    away = tmp_path / "away.git"
    shutil.move(remote, away)
    going = world.start("go", "--resume", "r1", "--json")
    try:
        assert wait_until(lambda: any("on the remote origin" in e["payload"]["reason"]
                                      for e in world.events("IntentOutcomeUnknown")), timeout=120)
        assert _pinned(world) == {} and going.poll() is None  # waiting, not failing
        shutil.move(away, remote)
        out, err = going.communicate(timeout=300)
    finally:
        if going.poll() is None:
            going.kill()
    assert going.returncode == 0, err
    summary = json.loads(out)
    assert summary["outcome"] == "delivered"
    assert {row["task"]: row["cycles"] for row in summary["tasks"]} == {"greet": 1, "name": 2, "shout": 1}
    assert set(_pinned(world)) <= set(_refs(remote, "refs/docket/candidates/"))
    for path, text in DELIVERED.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text


REMOTE_POINTS = ["pin:before-push",
                 *(f"effector:{step}@CandidatePinRequested.v2" for step in ("before-act", "after-act", "after-outcome")),
                 "integrate:before-push",
                 *(f"effector:{step}@IntegrationStepRequested.v2" for step in ("before-act", "after-act",
                                                                                "after-outcome")),
                 *(f"effector:{step}@IntegrationTargetRequested.v3" for step in ("before-act", "after-act",
                                                                                  "after-outcome"))]


def test_a_pin_killed_before_its_push_is_pushed_by_replay_once(tmp_path):
    """SIGKILL between the pin here and the push: the candidate ref is here, not on the remote, and not recorded as
    pinned; resuming observes it, pushes it (once) and the run delivers."""
    world, remote = _world_with_remote(tmp_path)
    killed = world.go("r1", "--parallel", "1", fault="pin:before-push")
    assert killed.returncode == -9, killed.stderr
    here = _refs(world.repo, "refs/docket/candidates/")
    assert len(here) == 1 and _refs(remote, "refs/docket/candidates/") == {} and _pinned(world) == {}
    done = world.resume("r1")
    assert done.returncode == 0, done.stderr
    (ref, commit), = here.items()
    assert _pinned(world)[ref] == commit == _refs(remote, "refs/docket/candidates/")[ref]
    assert [e["payload"]["result"] for e in world.events("CandidatePinned") if e["payload"]["ref"] == ref] == [
        "created"]


@pytest.mark.parametrize("point", REMOTE_POINTS[1:])
def test_killed_at_each_remote_effects_crash_point_the_resumed_run_delivers_the_same(tmp_path, point):
    """SIGKILL at every step of a push's effect (the candidate's create-only push, the target's compare-and-swap):
    the resumed run records each outcome once, every pinned candidate is on the remote as the ledger says, and the
    remote's target holds the delivered tree."""
    world, remote = _world_with_remote(tmp_path)
    killed = world.go("r1", "--parallel", "3", fault=point)
    assert killed.returncode == -9, (point, killed.stderr)
    done = world.resume("r1")
    assert done.returncode == 0, done.stderr
    pinned = world.events("CandidatePinned")
    assert len({e["payload"]["binding_id"] for e in pinned}) == len(pinned)  # one outcome per pin
    on_remote = _refs(remote, "refs/docket/candidates/")
    assert all(on_remote[e["payload"]["ref"]] == e["payload"]["commit"] for e in pinned)
    requested = {e["payload"]["intent_id"] for e in world.events("IntegrationTargetRequested")}
    completed = [e["payload"]["intent_id"] for e in world.events("IntegrationCompleted")]
    assert sorted(completed) == sorted(requested)  # every target move resolved, once
    steps = {e["payload"]["intent_id"] for e in world.events("IntegrationStepRequested")}
    merged = [e["payload"] for e in world.events("IntegrationStepMerged")]
    assert sorted(m["intent_id"] for m in merged) == sorted(steps)  # every step's move resolved, once
    assert _refs(remote, "refs/docket/integrations/") == {"refs/docket/integrations/r1": merged[-1]["merge_commit"]}
    for path, text in DELIVERED.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text


def test_killed_at_random_instants_a_run_on_a_remote_converges(tmp_path):
    """SIGKILL `docket go` at random instants, three times, resuming after each: the run delivers on the remote, each
    pin is recorded once and names what the remote has, and the clone's own branch never moved."""
    import random
    import time

    world, remote = _world_with_remote(tmp_path)
    base = git(world.repo, "rev-parse", "main")
    rng = random.Random(2026_12_03)
    first = ("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--json")
    going = world.start(*first)
    for _ in range(3):
        time.sleep(rng.uniform(0.2, 1.5))  # a run here takes about 3 s: each kill lands in it
        if going.poll() is None:
            going.kill()
        going.communicate(timeout=60)
        # as a user does: killed before the run was opened, start it again; before its plan was recorded, resume it
        # with its tasks (that finishes planning it)
        opened = any(e["payload"]["run_id"] == "r1" for e in world.events("RunOpened"))
        going = world.start(*(("go", "--resume", "r1", "--tasks", "tasks.toml", "--json") if opened else first))
    out, err = going.communicate(timeout=300)
    assert going.returncode == 0, err
    assert json.loads(out)["outcome"] == "delivered"
    pinned = world.events("CandidatePinned")
    assert len({e["payload"]["binding_id"] for e in pinned}) == len(pinned)
    on_remote = _refs(remote, "refs/docket/candidates/")
    assert all(on_remote[e["payload"]["ref"]] == e["payload"]["commit"] for e in pinned)
    for path, text in DELIVERED.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text
    assert git(world.repo, "rev-parse", "main") == base


def test_a_remote_whose_url_changed_is_not_pushed_to(tmp_path):
    """The run recorded the remote's URL: pointing origin elsewhere mid-run sends none of its work there; the pins
    wait, saying why."""
    world, remote = _world_with_remote(tmp_path)
    killed = world.go("r1", "--parallel", "3", fault="go:before-launch")
    assert killed.returncode == -9, killed.stderr
    elsewhere = tmp_path / "elsewhere.git"
    git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    git(world.repo, "remote", "set-url", "origin", str(elsewhere))
    going = world.start("go", "--resume", "r1", "--json")
    try:
        assert wait_until(lambda: any("as the run recorded" in e["payload"]["reason"]
                                      for e in world.events("IntentOutcomeUnknown")), timeout=120)
    finally:
        going.kill()
        going.communicate(timeout=60)
    assert _refs(elsewhere, "refs/") == {} and _pinned(world) == {}


def test_an_unknown_remote_is_refused_before_anything_is_recorded(tmp_path):
    world = make_go_world(tmp_path, extra_config=REMOTE)  # no remote "origin" in the repository
    before = world.json("log")["events"]
    refused = world.run("run", "open", "--goal", "g", "--target", "main", "--id", "r1")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("docket: error: unknown-remote: [git] remote names 'origin'"), refused.stderr
    assert world.json("log")["events"] == before
