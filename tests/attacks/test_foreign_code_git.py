"""Attack: an agent plants filters, hooks, an fsmonitor and the rest in the repository's git config and attributes
(tests/attacks/foreign_code.py). Every git operation docket makes on that repository (a task's worktree, its capture
and pin, a check's execution, a merge, the integration ref, the target's checkout observed and moved) runs none of
them, and still does its honest work: the files are the commits' bytes, the target's checkout moves."""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.git.candidates import DulwichCandidateRefs
from docket.adapters.world.git.capture import Capture, DulwichCapture
from docket.adapters.world.workspaces.executions import execution_path
from docket.adapters.world.git.integration_refs import DulwichMerges
from docket.adapters.world.workspaces.port import DulwichWorkspaces
from tests.conftest import git

from .foreign_code import markers, plant

INERT = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "filter.evil.clean=",
         "-c", "filter.evil.smudge=", "-c", "filter.evil.process=", "-c", "filter.evil.required=false")


def test_no_program_the_repository_names_runs_in_any_git_work_docket_does(repo: Path, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    plant(repo, ran)
    base = git(repo, "rev-parse", "HEAD")
    common = repo / ".git"
    assert markers(ran) == []

    # a task's worktree, the agent's work in it, its capture and its pin
    workspaces = DulwichWorkspaces()
    worktree = tmp_path / "task"
    workspaces.create_worktree(common, worktree, "docket/task", base)
    assert (worktree / ".gitattributes").read_text() == "* filter=evil diff=evil merge=evil\n"
    (worktree / "feature.txt").write_text("honest work\n")
    captured = DulwichCapture().capture_twice(worktree, expected_head=base, base=base, artifact_dir=None,
                                           repository=common)
    assert isinstance(captured, Capture) and captured.changed == ("feature.txt",)
    refs = DulwichCandidateRefs()
    pin = "refs/docket/candidates/attack"
    refs.pin_candidate(common, pin, base, captured.tree, "docket: pin\n")
    candidate = git(repo, "rev-parse", pin)

    # a check's execution of the candidate
    execution = execution_path(common, "run-7k2m9x4q", "0" * 64, "tests", 1)
    workspaces.create_execution(common, execution, candidate)
    assert (execution / "feature.txt").read_text() == "honest work\n"
    assert workspaces.observe_execution(common, execution, candidate).state == "ready"

    # the merge, the integration ref, the target branch and its checkout (the user's main checkout)
    merges = DulwichMerges()
    (repo / "other.txt").write_text("the user's own change\n")
    git(repo, *INERT, "add", "other.txt")
    git(repo, *INERT, "commit", "-q", "--no-verify", "-m", "the user's own change")
    head = git(repo, "rev-parse", "HEAD")
    merged = merges.merge_candidate(common, head, candidate, "docket: integrate\n")
    assert merged.state == "merged" and merged.commit is not None
    merges.advance_ref(common, "refs/docket/integrations/attack", None, merged.commit)
    assert merges.observe_checkout(repo, head, merged.commit).state == "at-old"
    merges.update_checkout(repo, head, merged.commit)
    assert merges.observe_checkout(repo, head, merged.commit).state == "at-new"
    assert (repo / "feature.txt").read_text() == "honest work\n"

    assert markers(ran) == []
