"""The batch benchmark's workload runs end to end at a tiny size (make test does not run benchmarks).

Both sides (batch = 4 and one check per step) deliver the same target tree (measure checks it), the culprit is found
by bisection on the batched side, and the batched side uses fewer check runs. No time is asserted.
"""

from __future__ import annotations

from bench.batch import measure


def test_batched_and_per_step_queues_deliver_the_same_tree_with_fewer_check_runs(tmp_path):
    sides = measure(tmp_path, tasks=6, batch=4, rounds=1, caller=2, renamer=5)  # raises unless the trees are equal

    (batched,), (per_step,) = sides.batched, sides.per_step
    assert per_step.ranges[:5] == [(n, n, "passed") for n in range(1, 5)] + [(5, 5, "failed")]
    assert batched.ranges[:3] == [(1, 4, "passed"), (5, 6, "failed"), (5, 5, "failed")]
    assert per_step.check_runs == 7  # six steps, and the repaired one's
    assert batched.check_runs < per_step.check_runs
