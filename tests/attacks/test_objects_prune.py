"""`git gc --prune=now` and `git worktree prune` in a loop beside `docket go` (issue 21, item 3).

git's --prune=now deletes every loose object no ref reaches, at once: the objects a pin or a merge writes before
the ref that names them moves. docket must never leave a ref naming a missing object, must take a HEAD or worktree
that vanished as an observation (never exit 70), and must deliver what an undisturbed run delivers.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import make_go_world

TASKS = "".join(f'''
[[tasks]]
id = "t{i}"
title = "write file {i}"
prompt = """Write file {i}.
write f{i}.py: VALUE = {i}
"""
''' for i in range(6)) + '''
[[tasks]]
id = "after"
title = "build on t0"
depends_on = ["t0"]
prompt = """Build on t0.
append f0.py: MORE = 1
"""
'''


class Pruner:
    """git gc --prune=now and git worktree prune, over and over, until stopped."""

    def __init__(self, repo) -> None:  # noqa: ANN001
        self.repo, self.stop, self.rounds = repo, threading.Event(), 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            for argv in (["git", "gc", "--prune=now", "--quiet"], ["git", "worktree", "prune"]):
                subprocess.run(argv, cwd=self.repo, capture_output=True, timeout=120)
            self.rounds += 1

    def __enter__(self) -> "Pruner":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.stop.set()
        self.thread.join(timeout=180)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    world = make_go_world(tmp_path_factory.mktemp("reference"), target="trunk", tasks=TASKS)
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    assert done.returncode == 0, done.stderr
    return world.tree_of("trunk")


@pytest.mark.parametrize("attempt", range(3))
def test_go_beside_a_pruning_loop_delivers_the_undisturbed_tree_and_leaves_git_whole(tmp_path, reference, attempt):
    world = make_go_world(tmp_path, target="trunk", tasks=TASKS)
    exits = []
    with Pruner(world.repo) as pruner:
        done = world.go("r1", "--target", "trunk", "--parallel", "3", "--debug")  # a traceback, should it crash
        exits.append(done.returncode)
        for _ in range(4):  # resuming is allowed; exit 70 never is
            if done.returncode == 0:
                break
            assert done.returncode != 70, done.stderr
            done = world.resume("r1", "--debug")
            exits.append(done.returncode)
    assert pruner.rounds > 0
    assert 70 not in exits, (exits, done.stderr)
    assert done.returncode == 0, (exits, done.stderr + done.stdout)
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.tree_of("trunk") == reference
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=world.repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "missing" not in fsck.stdout + fsck.stderr, fsck.stdout + fsck.stderr
    assert world.run("verify").returncode == 0
    reconcile = world.json("reconcile")
    assert reconcile["findings"] == [] and reconcile["git"] == [], reconcile
    gc = subprocess.run(["git", "gc", "--prune=now", "--quiet"], cwd=world.repo, capture_output=True, text=True)
    assert gc.returncode == 0, gc.stderr
    assert git(world.repo, "rev-parse", "trunk")


def _loose_objects(repo) -> set[str]:  # noqa: ANN001
    folder = repo / ".git" / "objects"
    return {p.parent.name + p.name for p in folder.glob("??/*") if len(p.name) == 38}


def _prune_now(repo: Path) -> None:
    """What gc --prune=now does to loose objects no ref reaches. Not gc itself here: the kill may have left a lock on
    a ref another thread was writing, which gc's pack-refs refuses until it is removed (docket's resume removes it
    at once: its recorded writer is dead)."""
    assert subprocess.run(["git", "prune", "--expire=now"], cwd=repo).returncode == 0


def test_a_prune_between_the_capture_and_the_pin_leaves_no_ref_to_a_missing_object(tmp_path, reference):
    """Killed after the capture wrote its objects (unreferenced), a prune deletes them; the resumed run captures
    again, finds the worktree's files unchanged in its stat cache, and used to pin a tree whose blob was gone."""
    world = make_go_world(tmp_path, target="trunk", tasks=TASKS)
    killed = world.go("r1", "--target", "trunk", "--parallel", "3", fault="pin:after-capture")
    assert killed.returncode == -9, killed.stderr
    before = _loose_objects(world.repo)
    _prune_now(world.repo)
    assert before - _loose_objects(world.repo)  # the prune took the capture's objects
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    for _ in range(3):
        if done.returncode == 0:
            break
        assert done.returncode != 70, done.stderr
        done = world.resume("r1")
    assert done.returncode == 0, done.stderr + done.stdout
    assert world.tree_of("trunk") == reference
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=world.repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert world.json("reconcile")["git"] == []


def test_reconcile_reports_a_candidate_ref_naming_a_missing_object_and_apply_makes_it_whole(tmp_path, reference):
    world = make_go_world(tmp_path, target="trunk", tasks=TASKS)
    killed = world.go("r1", "--target", "trunk", "--parallel", "3", fault="go:after-pin")
    assert killed.returncode == -9, killed.stderr
    refs = git(world.repo, "for-each-ref", "--format=%(refname)", "refs/docket/candidates").split()
    assert refs
    ref = refs[0]
    blobs = git(world.repo, "ls-tree", "-r", ref).split("\n")
    wrote = next(line.split()[2] for line in blobs if line.split()[3].startswith("f"))
    path = world.repo / ".git" / "objects" / wrote[:2] / wrote[2:]
    if not path.exists():  # packed by an earlier gc: unpack it first
        pytest.skip("the blob is packed")
    path.unlink()  # what a prune that slipped past docket's checks leaves
    assert subprocess.run(["git", "fsck", "--no-progress"], cwd=world.repo, capture_output=True).returncode != 0
    assert world.run("verify").returncode == 0  # the ledger is intact: verify reads no git

    found = world.json("reconcile")
    broken = [g for g in found["git"] if g["kind"] == "ref-incomplete"]
    assert [g["path"] for g in broken] == [ref] and wrote in broken[0]["detail"]
    assert "ref-incomplete" in world.run("reconcile").stdout
    applied = world.json("reconcile", "--apply")
    assert [g["applied"] for g in applied["git"] if g["kind"] == "ref-incomplete"] == ["repaired from its workspace"]
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=world.repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert world.json("reconcile")["git"] == []
    done = world.go("r1", "--target", "trunk", "--parallel", "3")
    assert done.returncode == 0, done.stderr + done.stdout
    assert world.tree_of("trunk") == reference


def test_a_prune_between_a_steps_intent_and_its_act_does_not_wedge_the_queue(tmp_path, reference):
    """Killed with a step's intent recorded and its merge commit written but no ref naming it, a prune takes the
    merge; resumed, the act used to find no commit to move the ref to, and the step stayed unknown on every resume."""
    world = make_go_world(tmp_path, target="trunk", tasks=TASKS)
    killed = world.go("r1", "--target", "trunk", "--parallel", "3",
                      fault="effector:before-act@IntegrationStepRequested.v1")
    assert killed.returncode == -9, killed.stderr
    step = world.events("IntegrationStepRequested")[-1]["payload"]
    _prune_now(world.repo)
    gone = subprocess.run(["git", "cat-file", "-e", step["merge_commit"]], cwd=world.repo)
    assert gone.returncode != 0  # the prune took the step's merge commit
    done = world.resume("r1")
    assert done.returncode == 0, done.stderr + done.stdout
    assert world.tree_of("trunk") == reference
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=world.repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert world.json("reconcile")["git"] == []
