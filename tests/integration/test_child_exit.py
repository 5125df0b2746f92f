"""A check's or a hook's exit ends docket's wait for it at once (a pidfd), not at its next poll: the polls below are
an hour apart, and each wait returns as soon as the child ends, with everything it left in its group stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from docket.adapters.world.processes.child_exit import ChildExit
from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses, wait_for_group

HOUR = 3600.0
needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this system: a wait is a sleep")


def _gated(processes: PsutilProcesses, tmp_path: Path, script: str):
    spec = LaunchSpec(argv=("/bin/sh", "-c", script), cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                      log_path=tmp_path / "log")
    gated = processes.spawn_gated(spec)
    gated.open()
    return gated


def _wait_in_thread(processes: PsutilProcesses, gated, **limits) -> list:
    """wait_for_group in a thread, given far less than the hour one poll would take; its result, once returned."""
    result: list = []
    waiter = threading.Thread(target=lambda: result.append(wait_for_group(processes, gated, **limits)), daemon=True)
    waiter.start()
    waiter.join(timeout=120)
    if waiter.is_alive():
        processes.terminate_group(gated.identity, grace=1)
    return result


@needs_pidfd
def test_a_check_that_exits_between_polls_ends_the_wait(tmp_path: Path):
    processes = PsutilProcesses()
    gated = _gated(processes, tmp_path, "sleep 0.2; exit 3")  # it ends while the wait sleeps between polls
    assert _wait_in_thread(processes, gated, timeout_ms=10 * 3_600_000, poll=HOUR,
                           log_path=tmp_path / "log") == [(3, None)]


@needs_pidfd
def test_a_child_that_outlives_the_check_is_still_stopped(tmp_path: Path):
    processes = PsutilProcesses()
    marker = tmp_path / "survivor.pid"
    gated = _gated(processes, tmp_path, f"sleep 600 & echo $! > {marker}; exit 0")
    assert _wait_in_thread(processes, gated, timeout_ms=10 * 3_600_000, poll=HOUR) == [(0, None)]
    survivor = processes.identity(int(marker.read_text()))
    assert survivor is None or processes.liveness(survivor) == "dead"
    assert processes.group_liveness(gated.identity) == "dead"


def test_a_timeout_still_stops_the_whole_group(tmp_path: Path):
    processes = PsutilProcesses()
    gated = _gated(processes, tmp_path, "sleep 600 & sleep 600")
    ((code, cause),) = _wait_in_thread(processes, gated, timeout_ms=200, poll=0.05, grace=1)
    assert cause == "timeout" and code < 0
    assert processes.group_liveness(gated.identity) == "dead"


def test_a_child_already_reaped_falls_back_to_a_plain_sleep():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with ChildExit(child) as exit_:  # its pid may name another process now: never watched
        assert exit_.fd is None
        exit_.wait(0.01)
