"""Candidates through the real CLI: what `docket worker launch` pins when its agent exits, `docket candidate pin`,
divergence and release, checked against real git (`git add -A` in a private index, the refs, `git fsck`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ..conftest import Docket, git
from .test_workers import Workers

# What the agent of most tests does in its worktree: modify, delete, chmod, create (at depth), symlink; an ignored
# file and an untracked file under the artifact directory are left out, a tracked one there is kept.
EDITS = ("echo more >> a.txt; rm gone.txt; chmod +x script.sh; echo new > new.txt; mkdir -p dir/sub; "
         "echo deep > dir/sub/c.txt; ln -s a.txt link; echo noise > debug.log; mkdir -p out; "
         "echo report > out/untracked.txt; echo again >> out/tracked.txt")
CHANGED = ["a.txt", "dir/sub/c.txt", "gone.txt", "link", "new.txt", "out/tracked.txt", "script.sh"]
COMMIT = "git -c user.name=a -c user.email=a@example.com commit -q -m work"


@pytest.fixture
def workers(docket: Docket):
    repo = docket.cwd
    (repo / "a.txt").write_text("alpha\n")
    (repo / "gone.txt").write_text("deleted by the agent\n")
    (repo / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "dir").mkdir()
    (repo / "dir" / "b.txt").write_text("bravo\n")
    (repo / "out").mkdir()
    (repo / "out" / "tracked.txt").write_text("tracked artifact\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    w = Workers(docket)
    w.config('artifact_dir = "out"\n')
    try:
        yield w
    finally:
        w.stop_everything()


def launch(w: Workers, task: str, script: str) -> dict:
    w.plan(task)
    result = w.launch(task, "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    return result.json()


def git_add_all_tree(worktree: Path, index: Path, artifact_dir: str = "out") -> str:
    """The tree real git writes for the worktree in a private index: read-tree HEAD, add -A (untracked files under
    the artifact directory aside, tracked ones kept), write-tree."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}

    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=worktree, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    index.unlink(missing_ok=True)
    run("read-tree", "HEAD")
    run("add", "-A", "--", ".", f":(exclude){artifact_dir}")
    run("add", "-u", "--", artifact_dir)
    return run("write-tree")


def candidate_refs(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/docket/candidates")
    return dict(line.split(" ") for line in out.splitlines())


def error_line(result, code: str) -> None:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"docket: error: {code}: "), result.stderr


def planted_commit(repo: Path) -> str:
    """Another commit than any capture's: the base's tree with another message."""
    return git(repo, "commit-tree", "main^{tree}", "-p", "main", "-m", "planted by hand")


# --- pin -----------------------------------------------------------------------------------------------------------


def test_a_worker_exit_pins_exactly_what_git_add_all_writes_and_a_manual_pin_finds_the_same_candidate(
        workers, tmp_path):
    repo = workers.docket.cwd
    base = git(repo, "rev-parse", "main")
    doc = launch(workers, "t1", EDITS)
    pin = doc["pin"]
    assert pin["result"] == "pinned"
    candidate = pin["candidate"]
    binding = candidate["binding_id"]
    worktree = workers.worktree("t1")
    head = git(worktree, "rev-parse", "HEAD")
    assert head == base  # the agent committed nothing

    assert candidate["tree"] == git_add_all_tree(worktree, tmp_path / "private-index")
    assert git(repo, "rev-parse", f"{candidate['commit']}^{{tree}}") == candidate["tree"]
    assert git(repo, "rev-list", "--parents", "-n", "1", candidate["commit"]).split() == [candidate["commit"], head]
    assert candidate["parent"] == head and candidate["base"] == base
    assert candidate["changed_paths"] == CHANGED
    assert candidate["ref"] == f"refs/docket/candidates/r1/{binding}"
    assert candidate_refs(repo) == {candidate["ref"]: candidate["commit"]}
    # symlinks stay symlinks, the chmod is recorded
    assert git(repo, "ls-tree", candidate["commit"], "link").startswith("120000 blob ")
    assert git(repo, "cat-file", "-p", f"{candidate['commit']}:link") == "a.txt"
    assert git(repo, "ls-tree", candidate["commit"], "script.sh").startswith("100755 blob ")
    assert git(repo, "ls-tree", "-r", "--name-only", candidate["commit"]).split("\n") == [
        ".gitignore", "README.md", "a.txt", "dir/b.txt", "dir/sub/c.txt", "link", "new.txt", "out/tracked.txt", "script.sh"]

    again = workers("candidate", "pin", "r1", "--task", "t1", "--json").json()
    assert (again["result"], again["binding_id"], again["commit"]) == ("pinned", binding, candidate["commit"])
    assert candidate_refs(repo) == {candidate["ref"]: candidate["commit"]}  # one candidate, one ref
    assert len(workers.events("CandidatePinRequested.v1")) == 1

    (pinned,) = workers.events("CandidatePinned.v1")
    assert {k: pinned[k] for k in ("binding_id", "commit", "tree", "parent", "changed_paths", "base", "ref")} == {
        k: candidate[k] for k in ("binding_id", "commit", "tree", "parent", "changed_paths", "base", "ref")}
    assert pinned["result"] == "created"
    assert git(repo, "fsck", "--strict") == ""


def test_an_agent_that_commits_and_one_that_does_not_pin_the_same_tree(workers):
    edits = "echo more >> a.txt; rm gone.txt; chmod +x script.sh; echo new > new.txt; ln -s a.txt link"
    committed = launch(workers, "t1", f"{edits}; git add -A && {COMMIT}")["pin"]["candidate"]
    uncommitted = launch(workers, "t2", edits)["pin"]["candidate"]
    repo = workers.docket.cwd
    assert committed["tree"] == uncommitted["tree"]
    assert committed["changed_paths"] == uncommitted["changed_paths"] == [
        "a.txt", "gone.txt", "link", "new.txt", "script.sh"]
    head_t1 = git(workers.worktree("t1"), "rev-parse", "HEAD")
    assert head_t1 != uncommitted["parent"]  # t1 committed: its candidate sits on its own commit
    assert committed["parent"] == head_t1 and uncommitted["parent"] == committed["base"]
    assert git(repo, "rev-list", "--parents", "-n", "1", committed["commit"]).split() == [committed["commit"], head_t1]
    assert committed["binding_id"] != uncommitted["binding_id"]
    assert len(candidate_refs(repo)) == 2


def test_an_exit_with_nothing_changed_pins_nothing_and_says_so(workers):
    repo = workers.docket.cwd
    workers.plan("t1")
    human = workers("worker", "launch", "r1", "--task", "t1", "--", "sh", "-c", "echo nothing to do")
    assert "nothing changed in its worktree: nothing pinned" in human.stdout
    doc = workers.launch("t1", "--", "sh", "-c", "echo noise > debug.log; mkdir out; echo x > out/new.txt").json()
    assert doc["generation"] == 2 and doc["pin"]["result"] == "unchanged"  # only ignored and artifact files
    assert doc["pin"]["head"] == git(repo, "rev-parse", "main") and "candidate" not in doc["pin"]
    manual = workers("candidate", "pin", "r1", "--task", "t1", "--json").json()
    assert (manual["result"], manual["candidate"]) == ("unchanged", None)
    assert workers.events("CandidatePinRequested.v1") == [] and workers.events("CandidatePinned.v1") == []
    assert candidate_refs(repo) == {}


# --- divergence ----------------------------------------------------------------------------------------------------


def test_a_ref_planted_by_hand_at_the_candidate_path_is_a_divergence_and_is_left_untouched(workers):
    repo = workers.docket.cwd
    candidate = launch(workers, "t1", EDITS)["pin"]["candidate"]
    binding, ref = candidate["binding_id"], candidate["ref"]
    workers("candidate", "release", binding)
    assert candidate_refs(repo) == {}
    planted = planted_commit(repo)
    git(repo, "update-ref", ref, planted)

    result = workers("candidate", "pin", "r1", "--task", "t1", "--json", check=False)
    assert result.returncode == 3
    error_line(result, "candidate-diverged")
    (diverged,) = workers.events("CandidateDiverged.v1")
    assert (diverged["binding_id"], diverged["ref"], diverged["found"]) == (binding, ref, planted)
    assert len(workers.events("CandidatePinRequested.v1")) == 2  # the same capture, the same binding, asked again
    assert {e["binding_id"] for e in workers.events("CandidatePinRequested.v1")} == {binding}
    assert candidate_refs(repo) == {ref: planted}
    assert git(repo, "fsck", "--strict") == ""

    again = workers("candidate", "pin", "r1", "--task", "t1", check=False)  # refused again, nothing redone
    assert again.returncode == 3
    error_line(again, "candidate-diverged")
    assert len(workers.events("CandidatePinRequested.v1")) == 2
    assert candidate_refs(repo) == {ref: planted}


# --- release -------------------------------------------------------------------------------------------------------


def test_release_deletes_the_ref_once_and_a_second_release_changes_nothing(workers):
    repo = workers.docket.cwd
    candidate = launch(workers, "t1", EDITS)["pin"]["candidate"]
    binding = candidate["binding_id"]
    released = workers("candidate", "release", binding, "--json").json()
    assert (released["binding_id"], released["ref"], released["result"]) == (binding, candidate["ref"], "released")
    assert candidate_refs(repo) == {}
    (event,) = workers.events("CandidateReleased.v1")
    assert (event["binding_id"], event["result"]) == (binding, "released")

    again = workers("candidate", "release", binding, "--json").json()
    assert again["result"] == "released"
    assert len(workers.events("CandidateReleaseRequested.v1")) == 1 and len(workers.events("CandidateReleased.v1")) == 1
    assert git(repo, "cat-file", "-t", candidate["commit"]) == "commit"  # the object stays; only the ref went
    assert git(repo, "fsck", "--strict") == ""


def test_release_refuses_a_ref_moved_by_hand_and_leaves_it_where_it_is(workers):
    repo = workers.docket.cwd
    candidate = launch(workers, "t1", EDITS)["pin"]["candidate"]
    planted = planted_commit(repo)
    git(repo, "update-ref", candidate["ref"], planted, candidate["commit"])
    result = workers("candidate", "release", candidate["binding_id"], check=False)
    assert result.returncode == 3
    error_line(result, "candidate-diverged")
    assert candidate_refs(repo) == {candidate["ref"]: planted}
    (failed,) = workers.events("CandidateReleaseFailed.v1")
    assert failed["code"] == "candidate-diverged"
    assert workers.events("CandidateReleased.v1") == []


# --- hostile input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key, code, exit_code", [("not-hex!", "bad-candidate", 2), ("ABCDEF0123", "bad-candidate", 2),
                                                   ("abc1234", "bad-candidate", 2), ("", "bad-candidate", 2),
                                                   ("0" * 65, "bad-candidate", 2)])
def test_release_refuses_a_key_that_is_no_binding_id(workers, key, code, exit_code):
    result = workers("candidate", "release", key, check=False)
    assert result.returncode == exit_code
    error_line(result, code)


def test_an_unknown_full_binding_id_is_not_found_everywhere(workers):
    pytest.importorskip("docket.projections.candidates", reason="projections/candidates.py is another helper's work")
    workers.config('[checks.ok]\ncommand = ["true"]\n')
    for args in (("candidate", "show", "0" * 64), ("candidate", "release", "0" * 64), ("check", "run", "0" * 64)):
        result = workers(*args, check=False)
        assert result.returncode == 5, (args, result.stderr)
        error_line(result, "candidate-not-found")


@pytest.mark.parametrize("key, code, exit_code", [("not-hex!", "bad-candidate", 2), ("abc1234", "bad-candidate", 2),
                                                   ("0123abcd", "candidate-not-found", 5)])
def test_candidate_show_refuses_bad_short_and_unknown_keys_in_one_line(workers, key, code, exit_code):
    pytest.importorskip("docket.projections.candidates", reason="projections/candidates.py is another helper's work")
    pytest.importorskip("docket.projections.checks", reason="projections/checks.py is another helper's work")
    result = workers("candidate", "show", key, check=False)
    assert result.returncode == exit_code
    error_line(result, code)


def test_candidate_show_finds_a_candidate_by_prefix_and_by_commit(workers):
    pytest.importorskip("docket.projections.candidates", reason="projections/candidates.py is another helper's work")
    pytest.importorskip("docket.projections.checks", reason="projections/checks.py is another helper's work")
    candidate = launch(workers, "t1", EDITS)["pin"]["candidate"]
    for key in (candidate["binding_id"], candidate["binding_id"][:8], candidate["commit"]):
        shown = workers("candidate", "show", key, "--json").json()
        assert (shown["binding_id"], shown["commit"], shown["status"]) == (
            candidate["binding_id"], candidate["commit"], "pinned")
        assert shown["changed_paths"] == CHANGED
