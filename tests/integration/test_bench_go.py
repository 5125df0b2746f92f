"""The go benchmark's workloads run end to end at a tiny size (make test does not run benchmarks).

docket go and the shell loop deliver the same target tree (take_turns checks it), in fresh repositories; the
phases found in docket go's ledger account for its whole run. No time is asserted.
"""

from __future__ import annotations

import pytest

from bench.go import INTEGRATING, PHASES, measure_overhead, measure_parallel


def test_go_and_the_shell_loop_deliver_the_same_tree(tmp_path):
    sides = measure_overhead(tmp_path, tasks=2, rounds=1)  # raises unless both sides delivered the same tree

    assert [len(sides.wall_s[side]) for side in ("go", "loop")] == [1, 1]
    assert all(cpu >= 0 for side in ("go", "loop") for cpu in sides.cpu_s[side])
    assert {label for label, _ in PHASES} | {INTEGRATING} <= set(sides.phases_s)
    phases = sum(seconds for times in sides.phases_s.values() for seconds in times)
    assert phases == pytest.approx(sides.wall_s["go"][0], rel=0.01)  # every gap charged once, start to exit
    assert len(list(tmp_path.glob("docket-bench-*"))) == 2  # a fresh repository per measurement


def test_parallel_and_serial_runs_deliver_the_same_tree(tmp_path):
    sides = measure_parallel(tmp_path, tasks=2, sleep=0.1, parallel=2, rounds=1)

    assert [len(sides.wall_s[side]) for side in ("parallel", "serial")] == [1, 1]


def test_go_and_the_shell_loop_deliver_the_same_tree_on_the_nested_layout(tmp_path):
    sides = measure_overhead(tmp_path, tasks=2, rounds=1, layout="nested", nested=(60, 20))

    assert [len(sides.wall_s[side]) for side in ("go", "loop")] == [1, 1]
    assert len(list(tmp_path.glob("docket-bench-*/repo/pkg00"))) == 2  # both sides on the generated layout


def test_a_pipelined_run_charges_each_gap_to_what_ended_it_not_to_delivery():
    """The queue runs beside the agents: the target moves after each step, so what follows the first move is not
    all delivery (it was, and charged 3 s of 4.4 to 'moving the target, seal, complete, exit')."""
    from bench.go import DELIVERING, MOVING, phase_labels

    # the order of a real two-task run at --parallel 1: task 2 launches while task 1's step is re-checked
    names = ["RunOpened", "WorkerRegistered", "WorkerLaunched", "WorkerExited", "CandidatePinned", "CheckPassed",
             "HandoffConfirmed", "IntegrationPrepared", "IntegrationStepQueued", "WorkerRegistered",
             "IntegrationStepRequested", "WorktreeRequested", "IntegrationStepMerged", "CandidatePinned",
             "WorkerLaunched", "ExecutionCreated", "CheckPassed", "IntegrationStepVerified", "TaskFinished",
             "IntegrationTargetRequested", "WorkerExited", "CandidatePinned", "CheckPassed",
             "IntegrationStepRequested", "IntegrationStepMerged", "CheckPassed", "IntegrationStepVerified",
             "IntegrationTargetRequested", "IntegrationCompleted", "IntegrationQueueClosed", "ReceiptSealed",
             "RunCompleted", "LeaseReleased", "RunUnsupervised", "exit"]
    labels = dict(enumerate(phase_labels(names)))

    launching = next(label for label, _ in PHASES if label.startswith("launching"))
    judging = next(label for label, _ in PHASES if label.startswith("judging"))
    assert [labels[i] for i in (13, 15, 16, 17)] == [INTEGRATING] * 4  # the step's pin, execution, check, verdict
    assert labels[11] == labels[14] == launching  # task 2's launch inside task 1's step is still a launch
    assert labels[19] == labels[27] == MOVING
    assert [labels[i] for i in (20, 21, 22)] == [next(label for label, classes in PHASES
                                                      if any(c.__name__ == "WorkerExited" for c in classes)),
                                                 judging, judging]  # after a move: task 2's own work
    assert {labels[i] for i in range(28, 35)} == {DELIVERING}
    assert DELIVERING not in [labels[i] for i in range(28)]
