"""Never lose work: `worktree remove`, `gc` and `reconcile` remove only what the ledger proves is kept elsewhere.

Real repositories, the real CLI. A worktree with a change no candidate holds
survives every one of them with its change intact; once a candidate holds
exactly its content, it can go, and real git agrees afterwards.
"""

from __future__ import annotations

from docket.adapters.world.files.paths import executions_root, task_worktree_path
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docket.adapters.world.workspaces.port import DulwichWorkspaces

from ..conftest import git, listed_places

RUN, TASK = "r1", "t1"


@pytest.fixture
def world(docket):  # noqa: ANN001, ANN201
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)
    return docket


def worktree(docket, task: str = TASK) -> Path:  # noqa: ANN001
    return task_worktree_path(docket.cwd / ".git", RUN, task)


def launch(docket, script: str, task: str = TASK) -> dict:  # noqa: ANN001
    return docket("worker", "launch", RUN, "--task", task, "--json", "--", "sh", "-c", script).json()


def worktrees_listed(repo: Path) -> list[str]:
    return listed_places(repo)


def assert_git_clean(repo: Path) -> None:
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stderr.lower(), fsck.stdout + fsck.stderr
    assert subprocess.run(["git", "worktree", "prune", "-n", "-v"], cwd=repo, capture_output=True,
                          text=True).stdout.strip() == ""


def test_an_unpinned_change_survives_worktree_remove_and_gc(world):
    docket = world
    pinned = launch(docket, "echo one > a.txt")
    assert pinned["pin"]["result"] == "pinned"
    (worktree(docket) / "b.txt").write_text("not pinned yet\n")  # work done after the pin

    refused = docket("worktree", "remove", TASK, check=False)
    assert refused.returncode == 3, refused.stderr
    assert "unpinned-work" in refused.stderr and "b.txt" in refused.stderr
    assert (worktree(docket) / "b.txt").read_text() == "not pinned yet\n"

    kept = docket("gc", "--apply", "--json").json()
    (item,) = [i for i in kept["items"] if i["kind"] == "worktree"]
    assert item["action"] == "keep" and "active" in item["reason"]
    docket("run", "abort", RUN, "--reason", "done")
    kept = docket("gc", "--apply", "--json").json()
    (item,) = [i for i in kept["items"] if i["kind"] == "worktree"]
    assert item["action"] == "keep" and "b.txt" in item["reason"], item
    assert (worktree(docket) / "b.txt").read_text() == "not pinned yet\n"
    assert str(worktree(docket)) in worktrees_listed(docket.cwd)
    assert docket("log", "--json", "--type", "WorktreeRemovalRequested.v1").json()["events"] == []


def test_a_worktree_whose_content_is_pinned_is_removed_and_its_work_stays_in_the_candidate(world):
    docket = world
    launch(docket, "echo one > a.txt; git add a.txt; git -c user.name=a -c user.email=a@b commit -qm agent")
    (worktree(docket) / "b.txt").write_text("two\n")
    doc = docket("candidate", "pin", RUN, "--task", TASK, "--json").json()
    commit = doc["commit"]

    removed = docket("worktree", "remove", TASK, "--json").json()
    assert removed["result"] == "removed" and removed["binding_id"] == doc["binding_id"]
    assert not worktree(docket).exists()
    assert str(worktree(docket)) not in worktrees_listed(docket.cwd)
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", f"refs/heads/docket/{RUN}/{TASK}"],
                          cwd=docket.cwd, capture_output=True).returncode != 0
    # the candidate holds all of it: the agent's commit as parent, the uncommitted file in its tree
    assert git(docket.cwd, "show", f"{commit}:b.txt") == "two"
    assert git(docket.cwd, "show", f"{commit}^:a.txt") == "one"
    assert git(docket.cwd, "rev-parse", doc["ref"]) == commit
    assert_git_clean(docket.cwd)
    (event,) = docket("log", "--json", "--type", "WorktreeRemoved.v1").json()["events"]
    assert event["payload"]["result"] == "removed"
    again = docket("worktree", "remove", TASK, check=False)
    assert again.returncode == 3 and "no-worktree" in again.stderr
    # a later launch makes the worktree again, at the run's base
    assert launch(docket, "true")["pin"]["result"] == "unchanged"
    assert not (worktree(docket) / "a.txt").exists()


def test_gc_removes_delivered_and_unchanged_worktrees_of_closed_runs_and_says_why_it_keeps_the_rest(world):
    docket = world
    docket("task", "plan", RUN, "--title", "t2", "--id", "t2")
    docket("task", "plan", RUN, "--title", "t3", "--id", "t3")
    first = launch(docket, "echo one > a.txt")["pin"]["candidate"]  # pinned at exit, not delivered yet
    launch(docket, "true", task="t2")  # nothing changed: preserved by the base
    launch(docket, "echo x > x.txt", task="t3")
    (worktree(docket, "t3") / "late.txt").write_text("late\n")  # not pinned
    docket("run", "abort", RUN, "--reason", "done")

    listed = docket("gc", "--json").json()
    actions = {i["name"]: i["action"] for i in listed["items"] if i["kind"] == "worktree"}
    assert actions == {TASK: "keep", "t2": "remove", "t3": "keep"}
    reasons = {i["name"]: i["reason"] for i in listed["items"]}
    assert first["binding_id"][:12] in reasons[TASK] and "not in the history of main" in reasons[TASK], reasons
    assert all(worktree(docket, t).exists() for t in (TASK, "t2", "t3"))  # without --apply nothing goes
    candidates = [i for i in listed["items"] if i["kind"] == "candidate"]
    assert len(candidates) == 2 and all(i["action"] == "keep" and "not in the history of main" in i["reason"]
                                        for i in candidates), candidates

    applied = docket("gc", "--apply", "--json").json()
    actions = {i["name"]: i["action"] for i in applied["items"] if i["kind"] == "worktree"}
    assert actions == {TASK: "keep", "t2": "removed", "t3": "keep"}
    assert worktree(docket).exists() and not worktree(docket, "t2").exists()
    assert (worktree(docket, "t3") / "late.txt").read_text() == "late\n"
    assert_git_clean(docket.cwd)
    human = docket("gc").stdout
    assert "keep" in human and "late.txt" in human

    git(docket.cwd, "merge", "-q", "--ff-only", first["commit"])  # the user delivers t1's work by hand
    applied = docket("gc", "--apply", "--json").json()
    actions = {i["name"]: i["action"] for i in applied["items"]}
    assert actions == {TASK: "removed", "t3": "keep", first["binding_id"]: "removed",
                       [i["name"] for i in candidates if i["name"] != first["binding_id"]][0]: "keep"}, applied
    assert not worktree(docket).exists()
    assert git(docket.cwd, "show", "main:a.txt") == "one"
    assert_git_clean(docket.cwd)


def test_a_worktree_is_not_removed_while_its_worker_runs(world):
    docket = world
    started = worktree(docket) / ".started"  # in its worktree: its sandbox lets it write nowhere else
    proc = subprocess.Popen([sys.executable, "-m", "docket", "worker", "launch", RUN, "--task", TASK, "--", "sh",
                             "-c", "touch .started; sleep 30"], cwd=docket.cwd, env=docket.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        refused = docket("worktree", "remove", TASK, check=False)
        assert refused.returncode == 3 and "worker-running" in refused.stderr, refused.stderr
        assert worktree(docket).exists()
    finally:
        docket("worker", "stop", TASK, check=False)
        proc.communicate(timeout=60)


def test_reconcile_removes_refs_and_worktrees_no_record_owns_but_never_a_worktree_with_a_branch(world):
    docket = world
    pinned = launch(docket, "echo one > a.txt")["pin"]["candidate"]
    head = git(docket.cwd, "rev-parse", "HEAD")
    planted = f"refs/docket/candidates/{RUN}/{'f' * 64}"
    git(docket.cwd, "update-ref", planted, head)
    orphan_execution = executions_root(docket.cwd / ".git") / RUN / ("e" * 64) / "tests-1"
    DulwichWorkspaces().create_execution(docket.cwd / ".git", orphan_execution, head)
    branch_holder = task_worktree_path(docket.cwd / ".git", "r9", "t9")
    DulwichWorkspaces().create_worktree(docket.cwd / ".git", branch_holder, "keep-me", head)

    found = docket("reconcile", "--json").json()
    paths = {g["path"] for g in found["git"]}
    assert paths == {planted, str(orphan_execution), str(branch_holder)}, found["git"]
    assert pinned["ref"] not in paths and str(worktree(docket)) not in paths

    applied = docket("reconcile", "--apply", "--json").json()
    outcome = {g["path"]: g["applied"] for g in applied["git"]}
    assert outcome[planted] == "deleted" and outcome[str(orphan_execution)] == "removed"
    assert outcome[str(branch_holder)].startswith("kept")
    refs = git(docket.cwd, "for-each-ref", "--format=%(refname)", "refs/docket/").splitlines()
    assert refs == [pinned["ref"]]
    assert not orphan_execution.exists() and branch_holder.exists()
    assert str(branch_holder) in worktrees_listed(docket.cwd)
    assert_git_clean(docket.cwd)
    left = docket("reconcile", "--json").json()
    assert [g["path"] for g in left["git"]] == [str(branch_holder)]


def test_after_pins_checks_and_removals_git_agrees_with_the_projections(world):
    import sqlite3

    docket = world
    (docket.cwd / "docket.toml").write_text('artifact_dir = "out"\n[checks.ok]\ncommand = ["true"]\n'
                                            '[checks.bad]\ncommand = ["sh", "-c", "exit 1"]\n')
    docket("task", "plan", RUN, "--title", "t2", "--id", "t2")
    first = launch(docket, "echo one > a.txt")["pin"]["candidate"]
    launch(docket, "echo two > b.txt", task="t2")
    assert docket("check", "run", first["binding_id"], check=False).returncode == 6  # one passes, one fails
    docket("worktree", "remove", TASK)

    listed = set(worktrees_listed(docket.cwd))
    views = sqlite3.connect(docket.cwd / ".git" / "docket" / "views.sqlite")
    try:
        task_worktrees = {row[0] for row in views.execute("SELECT worktree FROM tasks WHERE worktree IS NOT NULL")}
        executions = {row[0] for row in views.execute("SELECT execution FROM checks WHERE execution_state != "
                                                      "'removed'")}
        states = sorted(row[0] for row in views.execute("SELECT status FROM checks"))
    finally:
        views.close()
    assert listed == {str(docket.cwd)} | task_worktrees | executions
    assert task_worktrees == {str(worktree(docket, "t2"))} and executions == set()
    assert states == ["failed", "passed"]
    refs = git(docket.cwd, "for-each-ref", "--format=%(refname)", "refs/docket/").splitlines()
    assert len(refs) == 2 and first["ref"] in refs
    assert_git_clean(docket.cwd)


def test_a_candidate_that_is_the_only_copy_of_its_work_is_released_only_when_discarded_on_the_record(world):
    docket = world
    candidate = launch(docket, "echo one > a.txt")["pin"]["candidate"]
    (worktree(docket) / "a.txt").write_text("changed since the pin\n")  # the worktree no longer holds it

    refused = docket("candidate", "release", candidate["binding_id"], check=False)
    assert refused.returncode == 3 and "unpreserved-candidate" in refused.stderr, refused.stderr
    assert git(docket.cwd, "rev-parse", candidate["ref"]) == candidate["commit"]
    assert docket("log", "--json", "--type", "CandidateReleaseRequested.v1").json()["events"] == []

    (worktree(docket) / "a.txt").write_text("one\n")  # the worktree holds it again: the ref may go
    assert docket("candidate", "release", candidate["binding_id"], "--json").json()["result"] == "released"
    (intent,) = events = docket("log", "--json", "--type", "CandidateReleaseRequested.v1").json()["events"]
    assert "kept: the task's worktree" in intent["payload"]["reason"], events

    second = docket("candidate", "pin", RUN, "--task", TASK, "--json").json()  # pinned again after the release
    assert second["binding_id"] == candidate["binding_id"] and second["result"] == "pinned"
    (worktree(docket) / "a.txt").write_text("moved on\n")
    discarded = docket("candidate", "release", candidate["binding_id"], "--discard", "--reason", "bad idea",
                       "--json").json()
    assert discarded["result"] == "released"
    reasons = [e["payload"]["reason"] for e in
               docket("log", "--json", "--type", "CandidateReleaseRequested.v1").json()["events"]]
    assert reasons[-1] == "discarded: bad idea"
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", candidate["ref"]], cwd=docket.cwd,
                          capture_output=True).returncode != 0
