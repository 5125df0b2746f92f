"""A fork bomb is bounded by the launch's pids cgroup, where docket can make one; it leaves nothing behind."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from docket.adapters.world.processes import process_tree
from docket.adapters.world.processes.pids_limit import PIDS_MAX, PidsLimit
from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses

BOMB = r'''
import os, sys, time
made = 0
for _ in range(4 * int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.setsid()
        time.sleep(300)
        os._exit(0)
    made += 1
print("forked", made, flush=True)
'''


def test_a_fork_bomb_stops_at_the_bound_and_nothing_of_it_outlives_its_launch(tmp_path: Path):
    probe = PidsLimit.make(f"probe-{os.getpid()}")
    if probe is None:
        pytest.skip("no writable pids cgroup here (cgroup v1's pids hierarchy, or a v2 folder delegating pids): "
                    "docket cannot bound a launch's processes on this machine")
    probe.remove()
    assert process_tree.become_subreaper()
    processes = PsutilProcesses()
    script = tmp_path / "bomb.py"
    script.write_text(BOMB)
    log = tmp_path / "bomb.log"
    gated = processes.spawn_gated(LaunchSpec(argv=(sys.executable, str(script), str(PIDS_MAX)), cwd=tmp_path,
                                             env={"PATH": os.environ["PATH"]}, log_path=log))
    limit = processes._limits[gated.identity]
    gated.open()
    gated.popen.wait(timeout=120)
    made = int(log.read_text().split()[-1])
    assert 0 < made < PIDS_MAX  # the bound held: it could not make four times the bound
    assert processes.stop_tree(gated.identity) == "dead"
    assert not limit.folder.exists()  # its cgroup was empty, and removed
    assert process_tree.orphans() == []
