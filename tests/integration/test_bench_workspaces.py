"""The workspaces benchmark's workloads run end to end at a tiny size (make test does not run benchmarks).

No time is asserted: the shape is made once and reused, creation and pin each produce one figure per side, and
the candidates the pins made are deleted again.
"""

from __future__ import annotations

from bench.workspaces import folders, git, measure_creation, measure_pin, prepare


def test_the_workspaces_workloads_run_and_leave_nothing_behind(tmp_path):
    assert len(folders(1_800)) == 1_800 and len(set(folders(1_800))) == 1_800
    repo = tmp_path / "repo"
    base = prepare(repo, files=60, dirs=140)
    assert prepare(repo, files=60, dirs=140) == base  # made once, then reused
    created = measure_creation(repo, base, rounds=1, work=tmp_path)
    assert [len(created[side]) for side in ("git", "docket")] == [1, 1]
    pinned, changed = measure_pin(repo, base, rounds=2, under=tmp_path)
    assert [len(pinned[side]) for side in ("git", "docket")] == [2, 2] and changed > 10
    assert git(repo, "for-each-ref", "refs/docket/") == ""
    assert git(repo, "worktree", "list").count("\n") == 0
