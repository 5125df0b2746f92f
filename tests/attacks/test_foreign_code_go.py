"""Attack, through `docket go`: an agent of an earlier run left filters, hooks, an fsmonitor and the rest planted in
the repository's git config and attributes (tests/attacks/foreign_code.py), with a committed `* filter=evil`
.gitattributes on the target. A whole run (worktrees, captures, pins, check executions, merges, the integration ref,
the target and its checkout moved) runs none of the planted programs, and delivers the honest work."""

from __future__ import annotations

from tests.conftest import git
from tests.e2e.go_world import DELIVERED, make_go_world

from .foreign_code import markers, plant

INERT = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "filter.evil.clean=",
         "-c", "filter.evil.smudge=", "-c", "filter.evil.process=", "-c", "filter.evil.required=false")


def test_a_run_in_a_repository_with_planted_programs_runs_none_of_them_and_delivers(tmp_path):
    world = make_go_world(tmp_path)
    ran = tmp_path / "ran"
    plant(world.repo, ran)
    assert markers(ran) == []
    done = world.go("planted")
    assert done.returncode == 0, done.stdout + done.stderr
    assert markers(ran) == []
    for path, text in DELIVERED.items():
        assert world.file_at("main", path) == text
        assert (world.repo / path).read_text() == text  # the user's checkout moved with the target
    assert git(world.repo, *INERT, "status", "--porcelain", "--untracked-files=no") == ""
    assert markers(ran) == []
