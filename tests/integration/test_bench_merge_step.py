"""The merge-step benchmark's workload runs end to end at a tiny size (make test does not run benchmarks): docket's
step (merge, execution made from the pool, observed, inspected, given back, ref moved) and git merge --no-ff merge
the same trees (measure checks it) on both layouts. No time is asserted."""

from __future__ import annotations

import pytest

from bench.merge_step import measure


@pytest.mark.parametrize("layout", ["tiny", "nested"])
def test_docket_and_git_merge_the_same_trees(tmp_path, layout):
    times = measure(tmp_path, layout, rounds=2, nested=(60, 20))

    assert [len(times[side]) for side in ("git", "docket")] == [2, 2]
