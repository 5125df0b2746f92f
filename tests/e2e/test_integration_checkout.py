"""docket integrate into a target branch that a worktree has checked out, through the real CLI in real repositories:
a clean checkout is moved with the branch (its index and files first, as git's updateInstead), one with local changes
is refused with nothing moved, and a SIGKILL between the steps converges when run again."""

from __future__ import annotations

import signal
import subprocess
import tarfile
from pathlib import Path

import pytest

from ..conftest import Docket, git, make_repo
from .test_integration import RUN, fsck, make_world, offered, payloads, tip
from .test_integration_crashes import CHECKOUT_POINTS, World

MAIN = "refs/heads/main"


def world_on_main(docket: Docket) -> Docket:
    """Two tasks' candidates offered; the run's target is main, which the repository's own checkout has out."""
    make_world(docket, target="main", commit_config=True)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    return docket


def assert_checkout_at(worktree: Path, commit: str) -> None:
    """The worktree's HEAD, index and files are commit's, with nothing else in it."""
    assert git(worktree, "rev-parse", "HEAD") == commit
    assert git(worktree, "status", "--porcelain", "--untracked-files=all", "--ignored=no") == ""
    assert git(worktree, "write-tree") == git(worktree, "rev-parse", f"{commit}^{{tree}}")


def assert_files_of(worktree: Path, tree: str) -> None:
    """The files in the worktree (outside .git) are exactly tree's."""
    listed = sorted(git(worktree, "ls-tree", "-r", "--name-only", tree).splitlines())
    present = sorted(str(p.relative_to(worktree)) for p in worktree.rglob("*")
                     if p.is_file() and ".git" not in p.relative_to(worktree).parts)
    assert present == listed
    for path in listed:
        assert (worktree / path).read_bytes() == subprocess.run(
            ["git", "cat-file", "blob", f"{tree}:{path}"], cwd=worktree, capture_output=True, check=True).stdout


def test_a_clean_main_checkout_moves_with_the_target_to_the_final_commit(docket):
    world_on_main(docket)
    expected = tip(docket, MAIN)
    done = docket("integrate", RUN, "--json").json()
    assert (done["status"], done["expected"]) == ("completed", expected)
    assert tip(docket, MAIN) == done["final_commit"]
    assert_checkout_at(docket.cwd, done["final_commit"])
    assert_files_of(docket.cwd, done["final_tree"])
    assert (docket.cwd / "a.txt").read_text() == "one\n" and (docket.cwd / "b.txt").read_text() == "two\n"
    (requested,) = payloads(docket, "IntegrationTargetRequested.v2")
    assert (requested["checkout"], requested["expected_commit"]) == (str(docket.cwd), expected)
    (completed,) = payloads(docket, "IntegrationCompleted.v1")
    assert (completed["previous"], completed["commit"], completed["result"]) == (
        expected, done["final_commit"], "created")
    fsck(docket)
    docket("verify")


def test_ignored_files_do_not_make_a_checkout_dirty_and_are_kept(docket):
    make_world(docket, target="main", commit_config=False)
    (docket.cwd / ".git" / "info" / "exclude").write_text("docket.toml\nbuild/\n")  # ignored, never committed
    (docket.cwd / "build").mkdir()
    (docket.cwd / "build" / "out.o").write_text("object\n")
    offered(docket, "t1", "echo one > a.txt")
    done = docket("integrate", RUN, "--json").json()
    assert done["status"] == "completed" and git(docket.cwd, "rev-parse", "HEAD") == done["final_commit"]
    assert (docket.cwd / "build" / "out.o").read_text() == "object\n" and (docket.cwd / "docket.toml").exists()
    assert git(docket.cwd, "status", "--porcelain") == ""


def _staged(repo: Path) -> None:
    (repo / "README.md").write_text("staged\n")
    git(repo, "add", "README.md")


def _unstaged(repo: Path) -> None:
    (repo / "README.md").write_text("unstaged\n")


def _untracked(repo: Path) -> None:
    (repo / "a.txt").write_text("mine\n")  # where task t1's a.txt is to go
    (repo / "notes.txt").write_text("mine\n")  # out of the way: not named, kept


@pytest.mark.parametrize("change, named", [(_staged, "staged README.md"), (_unstaged, "unstaged README.md"),
                                           (_untracked, "untracked a.txt")])
@pytest.mark.parametrize("when", ["before", "after-intent"])
def test_a_checkout_with_local_changes_is_refused_with_nothing_moved_and_the_change_kept(docket, change, named,
                                                                                        when):
    """before: found when the queue is prepared (nothing recorded); after-intent: found by the target's intent,
    recorded (target-checked-out), asked again once the change is gone."""
    world_on_main(docket)
    expected = tip(docket, MAIN)
    if when == "after-intent":
        crashed = docket("integrate", RUN, fault="effector:before-observe@IntegrationTargetRequested.v2")
        assert crashed.returncode == -signal.SIGKILL
    change(docket.cwd)
    status = git(docket.cwd, "status", "--porcelain", "--untracked-files=all")
    refused = docket("integrate", RUN, check=False)
    assert refused.returncode == 3 and refused.stderr.startswith("docket: error: target-checked-out:"), refused.stderr
    assert refused.stderr.count("\n") == 1 and named in refused.stderr and str(docket.cwd) in refused.stderr
    assert tip(docket, MAIN) == expected and git(docket.cwd, "rev-parse", "HEAD") == expected
    assert git(docket.cwd, "status", "--porcelain", "--untracked-files=all") == status  # the change intact
    assert (docket.cwd / "a.txt").exists() == (change is _untracked)
    assert "notes.txt" not in refused.stderr
    assert payloads(docket, "IntegrationCompleted.v1") == []
    if when == "before":  # an untracked file is in the way only of the final tree, known once the steps merged
        assert payloads(docket, "IntegrationPrepared.v1") == [] or change is _untracked
        assert payloads(docket, "IntegrationTargetRequested.v2") == []
        return
    (moved,) = payloads(docket, "IntegrationTargetMoved.v1")
    assert moved["code"] == "target-checked-out" and named in moved["message"]
    git(docket.cwd, "reset", "-q", "--hard")  # the user puts the change away
    (docket.cwd / "a.txt").unlink(missing_ok=True)
    done = docket("integrate", RUN, "--json").json()
    assert done["status"] == "completed"
    (docket.cwd / "notes.txt").unlink(missing_ok=True)
    assert_checkout_at(docket.cwd, done["final_commit"])


def test_a_target_moved_by_someone_else_after_the_checkout_was_updated_puts_the_checkout_back(docket):
    world_on_main(docket)
    expected = tip(docket, MAIN)
    crashed = docket("integrate", RUN, fault="integrate:after-checkout-update")
    assert crashed.returncode == -signal.SIGKILL
    assert (docket.cwd / "a.txt").exists() and tip(docket, MAIN) == expected  # files moved, the branch not
    theirs = git(docket.cwd, "commit-tree", "-p", expected, "-m", "someone else's",
                 git(docket.cwd, "rev-parse", f"{expected}^{{tree}}"))
    git(docket.cwd, "update-ref", MAIN, theirs, expected)
    moved = docket("integrate", RUN, check=False)
    assert moved.returncode == 3 and moved.stderr.startswith("docket: error: target-moved:"), moved.stderr
    (event,) = payloads(docket, "IntegrationTargetMoved.v1")
    assert (event["code"], event["found"]) == ("target-moved", theirs)
    assert tip(docket, MAIN) == theirs
    assert git(docket.cwd, "diff-index", "--cached", "--name-only", expected) == ""  # the index is OLD's tree again
    assert_files_of(docket.cwd, git(docket.cwd, "rev-parse", f"{expected}^{{tree}}"))
    assert git(docket.cwd, "status", "--porcelain", "--untracked-files=all") == ""  # theirs has OLD's tree too
    assert payloads(docket, "IntegrationCompleted.v1") == []
    fsck(docket)


def test_a_target_checked_out_in_a_clean_linked_worktree_moves_it_and_leaves_the_main_checkout(docket, tmp_path):
    make_world(docket, tasks=("t1",))  # target release; the main checkout stays on main
    offered(docket, "t1", "echo one > a.txt")
    linked = tmp_path / "linked"
    git(docket.cwd, "worktree", "add", "-q", str(linked), "release")
    main_before = git(docket.cwd, "status", "--porcelain", "--untracked-files=all")
    done = docket("integrate", RUN, "--json").json()
    assert done["status"] == "completed" and tip(docket, "refs/heads/release") == done["final_commit"]
    assert_checkout_at(linked, done["final_commit"])
    assert_files_of(linked, done["final_tree"])
    (requested,) = payloads(docket, "IntegrationTargetRequested.v2")
    assert requested["checkout"] == str(linked)
    assert git(docket.cwd, "rev-parse", "HEAD") == git(docket.cwd, "rev-parse", "main")
    assert git(docket.cwd, "status", "--porcelain", "--untracked-files=all") == main_before
    assert not (docket.cwd / "a.txt").exists()
    fsck(docket)


# --- SIGKILL at each point of the target's move, then integrate again -----------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):  # noqa: ANN001, ANN201
    import os

    root = tmp_path_factory.mktemp("checkout-world")
    repo = make_repo(root / "repo")
    docket = world_on_main(Docket(repo, {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}))
    archive = root / "world.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(repo, arcname="repo")
    world = World(docket, archive)
    world.reference = docket("integrate", RUN, "--json").json()  # type: ignore[attr-defined]
    assert world.reference["status"] == "completed"  # type: ignore[attr-defined]
    return world


@pytest.mark.slow
@pytest.mark.parametrize("point", CHECKOUT_POINTS)
def test_integrate_killed_while_moving_a_checked_out_target_converges_when_run_again(world, point):  # noqa: ANN001
    docket = world.restore()
    reference = world.reference
    crashed = docket("integrate", RUN, fault=point)
    assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)
    done = docket("integrate", RUN, "--json").json()
    assert (done["status"], done["final_commit"], done["final_tree"]) == (
        "completed", reference["final_commit"], reference["final_tree"])
    assert tip(docket, MAIN) == reference["final_commit"]
    assert_checkout_at(docket.cwd, reference["final_commit"])
    assert_files_of(docket.cwd, reference["final_tree"])
    assert len(payloads(docket, "IntegrationCompleted.v1")) == 1
    assert len(payloads(docket, "IntegrationTargetRequested.v2")) == 1
    fsck(docket)
    docket("verify")
