"""The pin benchmark's workload runs end to end at a tiny size (make test does not run benchmarks).

The generated repository is reused on a second prepare, docket and the git CLI
sequence write the same tree (measure checks it) and list the same changed
paths. No time is asserted.
"""

from __future__ import annotations

from bench.pin import git, git_capture, measure, prepare

from docket.adapters.world.capture import capture


def test_the_pin_workload_writes_the_tree_git_writes(tmp_path):
    folder = tmp_path / "repo"
    base = prepare(folder, files=200, modified=10, untracked=3)
    assert prepare(folder, files=200, modified=10, untracked=3) == base  # made once, then reused

    m = measure(folder, base, rounds=1)

    assert [len(xs) for xs in (m.git_s, m.warm_s, m.cold_s, m.once_cold_s, m.once_warm_s)] == [1] * 5
    assert m.changed == 10 + 3
    tree, changed = git_capture(folder, base, tmp_path / "index")
    assert tree == m.tree
    docket = capture(folder, expected_head=base, base=base, artifact_dir="artifacts")
    assert [p.encode() for p in docket.changed] == sorted(changed)
    assert git(folder, "status", "--porcelain").count(b"artifacts") == 1  # untracked artifacts exist, uncaptured
