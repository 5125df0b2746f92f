"""docket integrate through the real CLI, in real git repositories: the merge queue from confirmed handoffs to the
target branch's compare-and-swap move, and every way it stops with nothing moved."""

from __future__ import annotations

import json
import subprocess

import pytest

from ..conftest import git

RUN = "r1"
TARGET = "release"  # not checked out anywhere: the main worktree stays on main
PASSING = '[checks.ok]\ncommand = ["sh", "-c", "test -f README.md"]\n'


def make_world(docket, checks: str = PASSING, tasks: tuple[str, ...] = ("t1", "t2"),  # noqa: ANN001, ANN201
               target: str = TARGET, commit_config: bool = False):
    """commit_config: docket.toml committed on main, as a project keeps it (the main checkout then is clean)."""
    (docket.cwd / "docket.toml").write_text(checks)
    if commit_config:
        git(docket.cwd, "add", "docket.toml")
        git(docket.cwd, "commit", "-q", "-m", "docket.toml")
    git(docket.cwd, "branch", TARGET)
    docket("init")
    docket("run", "open", "--target", target, "--goal", "g", "--id", RUN)
    for task in tasks:
        docket("task", "plan", RUN, "--title", task, "--id", task)
    return docket


def offered(docket, task: str, script: str) -> dict:  # noqa: ANN001
    """A worker's candidate for the task, its checks run and its handoff offered (integrate confirms it)."""
    candidate = docket("worker", "launch", RUN, "--task", task, "--json", "--", "sh", "-c",
                       script).json()["pin"]["candidate"]
    docket("check", "run", candidate["binding_id"])
    docket("handoff", "offer", candidate["binding_id"])
    return candidate


def payloads(docket, type_name: str) -> list[dict]:  # noqa: ANN001
    return [e["payload"] for e in docket("log", "--json", "--type", type_name).json()["events"]]


def tip(docket, ref: str = f"refs/heads/{TARGET}") -> str:  # noqa: ANN001
    return git(docket.cwd, "rev-parse", ref)


def merges_on(docket, since: str, ref: str = TARGET) -> list[str]:  # noqa: ANN001
    out = git(docket.cwd, "rev-list", "--merges", f"{since}..{ref}")
    return out.split() if out else []


def trailers_of(docket, commit: str) -> dict[str, str]:  # noqa: ANN001
    text = git(docket.cwd, "log", "-1", "--format=%(trailers:only,unfold)", commit)
    return dict(line.split(": ", 1) for line in text.splitlines() if line)


def fsck(docket) -> None:  # noqa: ANN001
    done = subprocess.run(["git", "fsck", "--strict"], cwd=docket.cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_clean_candidates_are_merged_reverified_and_the_target_moved_by_compare_and_swap(docket):
    make_world(docket)
    first = offered(docket, "t1", "echo one > a.txt")
    second = offered(docket, "t2", "echo two > b.txt")
    expected = tip(docket)
    done = docket("integrate", RUN, "--json").json()
    assert (done["status"], done["expected"], done["skipped"], done["overlaps"]) == ("completed", expected, [], [])
    assert tip(docket) == done["final_commit"]
    assert git(docket.cwd, "rev-parse", f"{TARGET}^{{tree}}") == done["final_tree"]
    assert [s["status"] for s in done["steps"]] == ["verified", "verified"]
    merges = merges_on(docket, expected)
    assert merges == [s["merge_commit"] for s in reversed(done["steps"])]
    assert git(docket.cwd, "rev-parse", f"{merges[0]}^1") == merges[1]  # step 2 merged into step 1's merge
    assert git(docket.cwd, "rev-parse", f"{merges[1]}^1") == expected  # step 1 merged into the expected commit
    for merge, candidate, task in zip(reversed(merges), (first, second), ("t1", "t2")):
        assert git(docket.cwd, "rev-parse", f"{merge}^2") == candidate["commit"]
        assert trailers_of(docket, merge) == {"Docket-Run": RUN, "Docket-Task": task, "Docket-Worker": task,
                                              "Docket-Generation": "1", "Docket-Candidate": candidate["binding_id"]}
    (completed,) = payloads(docket, "IntegrationCompleted.v1")
    assert (completed["previous"], completed["commit"], completed["result"]) == (
        expected, done["final_commit"], "created")
    # re-verification: each step's merged tree pinned as an integration-<n> candidate of its task, checked there
    verified = payloads(docket, "IntegrationStepVerified.v1")
    assert [v["step"] for v in verified] == [1, 2]
    pins = {p["binding_id"]: p for p in payloads(docket, "CandidatePinRequested.v1")}
    passed = {p["binding_id"]: p for p in payloads(docket, "CheckPassed.v1")}
    for event, step in zip(verified, done["steps"]):
        binding = event["verification_binding"]
        assert binding == step["verification_binding"]
        assert (pins[binding]["boundary"], pins[binding]["parent"], pins[binding]["tree"]) == (
            f"integration-{step['step']}", step["merge_commit"], step["tree"])
        (check,) = event["checks"]
        assert check["check"] == "ok" and passed[binding]["check_id"] == check["check_id"]
    # each pin lists what its step changed on the integration, against the head it merged onto
    first, second = (pins[v["verification_binding"]] for v in verified)
    assert (first["changed_paths"], first["base"]) == (["a.txt"], expected)
    assert (second["changed_paths"], second["base"]) == (["b.txt"], done["steps"][0]["merge_commit"])
    assert tip(docket, f"refs/docket/integrations/{RUN}") == done["final_commit"]
    fsck(docket)
    docket("verify")
    # again: the completed integration, nothing changed
    count = len(docket("log", "--json").json()["events"])
    again = docket("integrate", RUN)
    assert again.returncode == 0 and done["final_commit"] in again.stdout
    assert "step 2 task t2" in again.stdout and "merged as" in again.stdout
    assert len(docket("log", "--json").json()["events"]) == count and tip(docket) == done["final_commit"]


def test_two_candidates_that_conflict_stop_the_queue_with_nothing_moved(docket):
    make_world(docket)
    offered(docket, "t1", "echo one > same.txt")
    offered(docket, "t2", "echo two > same.txt")
    expected = tip(docket)
    stopped = docket("integrate", RUN, check=False)
    assert stopped.returncode == 3, stopped.stderr
    assert stopped.stderr.startswith("docket: error: step-conflicted:") and stopped.stderr.count("\n") == 1
    assert "step 2 task t2" in stopped.stdout and "conflicted: same.txt" in stopped.stdout
    (conflict,) = payloads(docket, "IntegrationStepConflicted.v1")
    assert (conflict["step"], conflict["task_id"], conflict["paths"], conflict["reason"]) == (
        2, "t2", ["same.txt"], "conflicted")
    (prepared,) = payloads(docket, "IntegrationPrepared.v1")
    assert prepared["overlaps"] == [{"first_task": "t1", "second_task": "t2", "paths": ["same.txt"], "whole_files": []}]
    assert tip(docket) == expected and merges_on(docket, expected) == []
    assert payloads(docket, "IntegrationTargetRequested.v1") == []
    again = docket("integrate", RUN, "--json", check=False)  # stopped for good: the same answer, nothing new
    assert again.returncode == 3 and "step-conflicted" in again.stderr and again.json()["status"] == "stopped"
    assert len(payloads(docket, "IntegrationStepConflicted.v1")) == 1
    fsck(docket)


def test_a_combination_that_fails_a_required_check_stops_at_that_step(docket):
    not_both = '[checks.apart]\ncommand = ["sh", "-c", "! (test -f a.txt && test -f b.txt)"]\n'
    make_world(docket, checks=not_both)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    expected = tip(docket)
    stopped = docket("integrate", RUN, check=False)
    assert stopped.returncode == 3 and stopped.stderr.startswith("docket: error: step-rejected:"), stopped.stderr
    assert "apart" in stopped.stderr
    (rejected,) = payloads(docket, "IntegrationStepRejected.v1")
    assert (rejected["step"], rejected["task_id"], rejected["check"]) == (2, "t2", "apart")
    assert [v["step"] for v in payloads(docket, "IntegrationStepVerified.v1")] == [1]
    assert tip(docket) == expected and payloads(docket, "IntegrationTargetRequested.v1") == []
    (failed,) = payloads(docket, "CheckFailed.v1")
    assert failed["binding_id"] == rejected["verification_binding"] and failed["check_id"] == rejected["check_id"]
    fsck(docket)


def test_a_target_moved_by_someone_else_is_left_alone(docket):
    make_world(docket)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    crashed = docket("integrate", RUN, fault="integrate:before-target")
    assert crashed.returncode < 0
    theirs = git(docket.cwd, "commit-tree", "-p", tip(docket), "-m", "someone else's",
                 git(docket.cwd, "rev-parse", f"{TARGET}^{{tree}}"))
    git(docket.cwd, "update-ref", f"refs/heads/{TARGET}", theirs)
    refs_before = git(docket.cwd, "for-each-ref", "refs/docket")
    moved = docket("integrate", RUN, check=False)
    assert moved.returncode == 3 and moved.stderr.startswith("docket: error: target-moved:"), moved.stderr
    (event,) = payloads(docket, "IntegrationTargetMoved.v1")
    assert (event["code"], event["found"]) == ("target-moved", theirs)
    assert tip(docket) == theirs
    assert git(docket.cwd, "for-each-ref", "refs/docket") == refs_before
    assert f"refs/docket/integrations/{RUN}" in refs_before and refs_before.count("refs/docket/candidates/") == 4
    assert payloads(docket, "IntegrationCompleted.v1") == []
    fsck(docket)


REFUSE = PASSING + '[integration]\nchecked_out_target = "refuse"\n'


def test_a_target_checked_out_in_a_clean_main_worktree_is_moved_with_its_index_and_files(docket):
    make_world(docket, target="main", commit_config=True)  # the repository's main worktree has main checked out
    offered(docket, "t1", "echo one > a.txt")
    done = docket("integrate", RUN, "--json").json()
    assert done["status"] == "completed" and tip(docket, "refs/heads/main") == done["final_commit"]
    assert git(docket.cwd, "rev-parse", "HEAD") == done["final_commit"]
    assert git(docket.cwd, "status", "--porcelain", "--untracked-files=all") == ""
    assert (docket.cwd / "a.txt").read_text() == "one\n"
    (requested,) = payloads(docket, "IntegrationTargetRequested.v2")
    assert requested["checkout"] == str(docket.cwd)
    fsck(docket)


def test_a_target_checked_out_in_a_main_worktree_with_local_changes_is_not_integrated_into(docket):
    make_world(docket, target="main", commit_config=True)
    offered(docket, "t1", "echo one > a.txt")
    (docket.cwd / "README.md").write_text("mine\n")
    before = tip(docket, "refs/heads/main")
    refused = docket("integrate", RUN, check=False)
    assert refused.returncode == 3 and refused.stderr.startswith("docket: error: target-checked-out:"), refused.stderr
    assert str(docket.cwd) in refused.stderr and "unstaged README.md" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert tip(docket, "refs/heads/main") == before and payloads(docket, "IntegrationPrepared.v1") == []
    assert (docket.cwd / "README.md").read_text() == "mine\n" and not (docket.cwd / "a.txt").exists()


def test_a_target_checked_out_in_the_main_worktree_is_not_integrated_into_when_configured_to_refuse(docket):
    make_world(docket, checks=REFUSE, target="main", commit_config=True)
    offered(docket, "t1", "echo one > a.txt")
    before = tip(docket, "refs/heads/main")
    refused = docket("integrate", RUN, check=False)
    assert refused.returncode == 3 and refused.stderr.startswith("docket: error: target-checked-out:"), refused.stderr
    assert str(docket.cwd) in refused.stderr and "refuse" in refused.stderr
    assert tip(docket, "refs/heads/main") == before and payloads(docket, "IntegrationPrepared.v1") == []
    assert "refs/docket/integrations/" not in git(docket.cwd, "for-each-ref", "refs/docket")
    assert git(docket.cwd, "status", "--porcelain") == ""


def test_a_target_checked_out_in_a_linked_worktree_waits_until_it_is_switched_away_when_configured_to_refuse(
        docket, tmp_path):
    make_world(docket, checks=REFUSE, tasks=("t1",))
    offered(docket, "t1", "echo one > a.txt")
    expected = tip(docket)
    docket("integrate", RUN, fault="integrate:before-target")
    elsewhere = tmp_path / "elsewhere"
    git(docket.cwd, "worktree", "add", "-q", str(elsewhere), TARGET)
    refused = docket("integrate", RUN, check=False)
    assert refused.returncode == 3 and refused.stderr.startswith("docket: error: target-checked-out:"), refused.stderr
    assert str(elsewhere) in refused.stderr and tip(docket) == expected
    git(elsewhere, "switch", "-q", "--detach")
    done = docket("integrate", RUN, "--json").json()
    assert done["status"] == "completed" and tip(docket) == done["final_commit"]
    assert git(elsewhere, "rev-parse", "HEAD") == expected  # detached: left where it was


def test_a_candidate_already_in_the_target_is_observed_not_merged_again(docket):
    make_world(docket)
    first = offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    git(docket.cwd, "update-ref", f"refs/heads/{TARGET}", first["commit"])  # t1's work landed already
    done = docket("integrate", RUN, "--json").json()
    assert done["expected"] == first["commit"] and done["status"] == "completed"
    one, two = done["steps"]
    assert (one["merge"], one["merge_commit"], one["status"]) == ("already-merged", first["commit"], "verified")
    assert two["merge"] == "merged"
    assert merges_on(docket, first["commit"]) == [two["merge_commit"]] == [done["final_commit"]]
    merged = payloads(docket, "IntegrationStepMerged.v1")
    assert [(m["step"], m["merge"]) for m in merged] == [(1, "already-merged"), (2, "merged")]
    fsck(docket)


def test_tasks_without_a_confirmed_candidate_are_skipped_and_listed(docket):
    make_world(docket, tasks=("t1", "t2", "t3"))
    offered(docket, "t1", "echo one > a.txt")
    docket("worker", "launch", RUN, "--task", "t2", "--", "sh", "-c", "echo two > b.txt")  # never offered
    done = docket("integrate", RUN, "--json").json()
    assert done["skipped"] == ["t2", "t3"] and [s["task_id"] for s in done["steps"]] == ["t1"]
    human = docket("integrate", RUN)
    assert "skipped" not in human.stdout  # the queue was fixed by the first pass


@pytest.mark.parametrize("setup", ["nothing", "unoffered"])
def test_nothing_to_integrate_is_refused_with_nothing_recorded(docket, setup):
    make_world(docket, tasks=("t1",))
    if setup == "unoffered":
        docket("worker", "launch", RUN, "--task", "t1", "--", "sh", "-c", "echo one > a.txt")
    refused = docket("integrate", RUN, check=False)
    assert refused.returncode == 3 and refused.stderr.startswith("docket: error: nothing-to-integrate:")
    assert payloads(docket, "IntegrationPrepared.v1") == []


def test_reconcile_owns_the_integration_ref_and_reports_one_no_run_owns(docket):
    make_world(docket)
    offered(docket, "t1", "echo one > a.txt")
    done = docket("integrate", RUN, "--json").json()
    stray = f"refs/docket/integrations/{RUN}-stray"
    git(docket.cwd, "update-ref", stray, done["final_commit"])
    report = docket("reconcile", "--apply", "--json", check=False)
    assert report.returncode in (0, 1), report.stderr
    text = report.stdout
    assert stray in text and f'"refs/docket/integrations/{RUN}"' not in text
    assert tip(docket, f"refs/docket/integrations/{RUN}") == done["final_commit"]  # kept: the ledger owns it
    gone = subprocess.run(["git", "rev-parse", "--verify", "--quiet", stray], cwd=docket.cwd, capture_output=True)
    assert gone.returncode != 0  # deleted by compare-and-swap: no run owns it


def test_status_after_integration_shows_each_tasks_own_candidate_not_the_integrations_pin(docket):
    make_world(docket)
    first = offered(docket, "t1", "echo one > a.txt")
    docket("integrate", RUN)
    shown = docket("status", RUN, "--json").json()
    text = json.dumps(shown)
    (task,) = [t for t in _tasks_in(shown) if t["task_id"] == "t1"]
    assert task["candidate"]["binding_id"] == first["binding_id"]
    assert task["candidate"]["boundary"] == "generation-1"
    assert "integration" in text  # the integration's steps are shown beside the tasks


def _tasks_in(document: dict) -> list[dict]:
    if "tasks" in document:
        return document["tasks"]
    return [t for run in document["runs"] for t in run["tasks"]]


@pytest.mark.slow
def test_two_integrators_racing_on_one_run_end_at_one_target_with_one_merge_per_step(docket):
    import sys

    make_world(docket)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    expected = tip(docket)
    for _ in range(2):  # every process sees the queue at some point of the other's work
        procs = [subprocess.Popen([sys.executable, "-m", "docket", "integrate", RUN, "--json"], cwd=docket.cwd,
                                  env=docket.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
        for code, out, err in results:
            assert code == 0, (code, err)
            assert json.loads(out)["status"] == "completed"
    assert len(payloads(docket, "IntegrationPrepared.v1")) == 1
    assert len(payloads(docket, "IntegrationCompleted.v1")) == 1
    assert [p["step"] for p in payloads(docket, "IntegrationStepMerged.v1")] == [1, 2]
    assert [p["step"] for p in payloads(docket, "IntegrationStepVerified.v1")] == [1, 2]
    assert len(merges_on(docket, expected)) == 2
    fsck(docket)
    docket("verify")


def test_the_artifacts_of_a_merged_trees_checks_land_in_the_steps_own_folder(docket):
    checks = ('artifact_dir = "reports"\n[checks.ok]\nshell = true\n'
              'command = ["mkdir -p reports && ls > reports/listing.txt"]\n')
    make_world(docket, checks=checks)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    docket("integrate", RUN)
    common = docket.cwd / ".git"
    for step, expected in ((1, "a.txt"), (2, "b.txt")):
        listing = common / "docket" / "integrations" / RUN / f"integration-{step}" / "reports" / "listing.txt"
        assert expected in listing.read_text().split()  # this step's merged tree, checked and reported
    assert not (common / "reports").exists()
    assert "b.txt" not in (common / "docket" / "integrations" / RUN / "integration-1" / "reports" /
                           "listing.txt").read_text().split()


def test_an_aborted_runs_queue_goes_no_further_and_its_target_stays(docket):
    make_world(docket)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    expected = tip(docket)
    crashed = docket("integrate", RUN, fault="integrate:after-prepare")
    assert crashed.returncode < 0
    docket("run", "abort", RUN, "--reason", "changed our mind")
    refused = docket("integrate", RUN, check=False)
    assert refused.returncode == 3 and "docket: error: run-closed:" in refused.stderr, refused.stderr
    assert tip(docket) == expected and merges_on(docket, expected) == []
    assert payloads(docket, "IntegrationStepRequested.v1") == []
