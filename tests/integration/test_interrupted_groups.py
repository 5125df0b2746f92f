"""Real process groups stopped because docket was interrupted (issue 35, item 6): a check's wait ends as soon as its
supervisor says stop, with its whole group gone; a second Ctrl-C (hurry_stops) cuts a SIGTERM's grace short.

Nothing here asserts a duration: the graces are far longer than the generous deadlines, so only the behaviour
under test can meet them."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses, hurry_stops, wait_for_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

PATIENCE = 30.0  # seconds: a deadline for conditions, never an expectation
NEVER = 3600.0  # a grace or timeout no test waits out


def members(pgid: int) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return found


@pytest.fixture
def stubborn(tmp_path: Path):
    """A gated group that shrugs off SIGTERM, with a child: (processes, gated). Killed at the end whatever happens."""
    processes = PsutilProcesses()
    log = tmp_path / "log"
    spec = LaunchSpec(argv=("sh", "-c", "trap '' TERM; sleep 1000 & echo started; wait"), cwd=tmp_path,
                      env={"PATH": os.environ["PATH"]}, log_path=log)
    gated = processes.spawn_gated(spec)
    gated.open()
    deadline = time.monotonic() + PATIENCE
    while "started" not in log.read_text():
        assert time.monotonic() < deadline, "the group never started"
        time.sleep(0.01)
    try:
        yield processes, gated
    finally:
        hurry_stops(False)
        processes.terminate_group(gated.identity, grace=0.1, wait=PATIENCE)
        gated.popen.wait(PATIENCE)


def test_a_second_ctrl_c_cuts_the_sigterm_grace_short(stubborn):
    processes, gated = stubborn
    ended: list[str] = []
    stopping = threading.Thread(target=lambda: ended.append(processes.terminate_group(gated.identity, grace=NEVER,
                                                                                        wait=PATIENCE)))
    stopping.start()
    try:
        hurry_stops()
        stopping.join(PATIENCE)
        assert not stopping.is_alive(), "the SIGTERM's grace was waited out"
    finally:
        hurry_stops(False)
    assert ended == ["dead"]
    assert members(gated.identity.pgid) == []
    assert gated.popen.poll() == -signal.SIGKILL


def test_once_the_stop_is_over_a_grace_holds_again(stubborn):
    processes, gated = stubborn
    hurry_stops()
    hurry_stops(False)  # docket go ended its stop: the next one gives its SIGTERM its grace
    ended: list[str] = []
    stopping = threading.Thread(target=lambda: ended.append(processes.terminate_group(gated.identity, grace=NEVER,
                                                                                        wait=PATIENCE)), daemon=True)
    stopping.start()
    stopping.join(1.0)
    assert stopping.is_alive() and ended == []  # still within its grace: TERM was shrugged off, no KILL yet
    hurry_stops()
    stopping.join(PATIENCE)
    hurry_stops(False)
    assert ended == ["dead"]


def test_a_checks_wait_stops_its_group_once_told_to(tmp_path: Path):
    processes = PsutilProcesses()
    log = tmp_path / "log"
    spec = LaunchSpec(argv=("sh", "-c", "sleep 1000 & echo started; sleep 1000"), cwd=tmp_path,
                      env={"PATH": os.environ["PATH"]}, log_path=log)
    gated = processes.spawn_gated(spec)
    gated.open()
    told = threading.Event()
    result: list[tuple[int, str | None]] = []
    waiting = threading.Thread(target=lambda: result.append(wait_for_group(
        processes, gated, timeout_ms=int(NEVER * 1000), log_path=log, grace=NEVER, stop=told.is_set)))
    waiting.start()
    try:
        told.set()
        waiting.join(PATIENCE)
        assert not waiting.is_alive(), "the wait went on after it was told to stop"
    finally:
        processes.terminate_group(gated.identity, grace=0.1, wait=PATIENCE)
        gated.popen.wait(PATIENCE)
    ((code, cause),) = result
    assert (code, cause) == (-signal.SIGTERM, "interrupted")
    assert members(gated.identity.pgid) == []  # its child too
