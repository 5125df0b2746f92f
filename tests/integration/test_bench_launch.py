"""The launch benchmark's workloads run end to end at a tiny size (make test does not run benchmarks).

One relaunch timed against a plain Popen, one in-process launch, and two agents
supervised together for a second: every agent ran and ended well, and the
ledger they leave verifies. No time is asserted.
"""

from __future__ import annotations

import subprocess

from bench.common import BIN
from bench.launch import environment, measure_launch, measure_supervision, prepare

from docket.adapters.service_layer.kernel.ledger import Ledger


def test_launch_and_supervision_workloads_run_and_leave_a_verifiable_ledger(tmp_path):
    prepare(tmp_path, ["t1", "s1", "s2"])

    launch = measure_launch(tmp_path, rounds=1)
    assert len(launch.docket_ms) == len(launch.popen_ms) == len(launch.python_ms) == len(launch.whole_ms) == 1
    assert len(launch.in_process_ms) == 1 and launch.imports_ms > 0
    assert all(first > 0 for first in [*launch.docket_ms, *launch.popen_ms, *launch.python_ms, *launch.in_process_ms])
    assert {label: len(ms) for label, ms in launch.phases_ms.items()} == {
        "ledger decisions": 1, "process scan": 1, "spawn": 1}
    assert launch.decisions >= 3  # the phase timers saw the launch's decisions (and were taken off afterwards)
    assert launch.whole_ms[0] > launch.docket_ms[0]  # docket outlives its agent: it records how the agent ended

    assert "timed" not in Ledger.decide.__qualname__
    supervision = measure_supervision(tmp_path, ["s1", "s2"], seconds=1)  # raises unless every agent ended ok
    assert supervision.agents == 2 and supervision.wall_s > 0 and supervision.cpu_s >= 0

    done = subprocess.run([str(BIN / "docket"), "verify"], cwd=tmp_path, env=environment(), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    log = subprocess.run([str(BIN / "docket"), "log", "--json"], cwd=tmp_path, env=environment(),
                         capture_output=True, text=True, check=True).stdout
    assert log.count('"WorkerExited') == 2 + 1 + 2 + 2  # 2 warm-up + 1 timed CLI launches, 2 in-process, s1, s2
