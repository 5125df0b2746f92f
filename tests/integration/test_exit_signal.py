"""A supervised agent's exit wakes its supervisor at once (a pidfd), not at the next tick: the wait below is an hour
long, and returns as soon as the child ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import anyio
import pytest

from docket.adapters.service_layer.use_cases.supervisor import ExitSignal

HOUR = 3600.0


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this system: the wait is a plain tick")
def test_a_childs_exit_ends_a_long_wait():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    signal = ExitSignal(child.pid)
    assert signal.fd is not None
    waiter = threading.Thread(target=lambda: anyio.run(signal.sleep, HOUR), daemon=True)
    waiter.start()
    waiter.join(timeout=120)  # far below the hour the wait would take without the exit waking it
    try:
        assert not waiter.is_alive()
        assert child.wait(timeout=10) == 0
    finally:
        child.kill()
        child.wait()
        signal.close()
    assert signal.fd is None


def test_a_child_already_reaped_falls_back_to_a_plain_sleep():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    signal = ExitSignal(child.pid)  # the pid names nothing now (or someone else: never waited on as ours)
    anyio.run(signal.sleep, 0.01)
    signal.close()
