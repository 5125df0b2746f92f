"""The pin benchmark's workload runs end to end at a tiny size (make test does not run benchmarks).

The generated repository is reused on a second prepare; every side pins the same tree in every round (measure
checks it against git's commit), the watched workspace's captures use its watch, and the candidates are deleted
again. No time is asserted.
"""

from __future__ import annotations

from bench.pin import Layout, git, measure, prepare


def test_the_pin_workload_pins_the_tree_git_commits_on_both_sides(tmp_path):
    layout = Layout("nested", 120, 40, 6, 3)
    repo, base = prepare(layout, under=tmp_path)
    assert prepare(layout, under=tmp_path) == (repo, base)  # made once, then reused

    m = measure(repo, base, layout, rounds=2, under=tmp_path)

    assert {side: len(xs) for side, xs in m.times.items()} == {"git": 2, "docket": 2, "no watch": 2, "process": 2}
    assert m.changed == 6 + 3
    assert m.watched >= 2  # the workspace made in this process was pinned from its watch, not walked
    assert git(repo, "for-each-ref", "refs/docket/") == ""
