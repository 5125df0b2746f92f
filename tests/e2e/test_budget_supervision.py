"""A run's budget bills only time some docket process supervised its work (issue 7, item 6).

The figures are read back from the ledger's own recorded times, never from a
clock in the test: a supervision is billed from its RunSupervised to its
RunUnsupervised; a supervisor killed mid-run is ended by `docket reconcile
--apply` at its last sign of life, and the time after it is not billed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from docket.domain.kernel.values import to_ms

pytestmark = pytest.mark.slow


def events(docket, type_name: str) -> list[dict]:
    return [e for e in docket("log", "--json").json()["events"] if e["type"] == type_name]


def used_ms(docket, run_id: str) -> int:
    return docket("status", run_id, "--json").json()["run"]["used_ms"]


@pytest.fixture
def run(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", "--budget", "1h")
    docket("task", "plan", "r1", "--title", "t", "--id", "t1")
    return "r1"


def test_a_supervised_launch_is_billed_from_its_supervision_to_its_end_and_nothing_after(docket, run):
    assert used_ms(docket, run) == 0  # open and active, but nothing supervised yet
    docket("worker", "launch", run, "--task", "t1", "--", "sh", "-c", "sleep 0.3")
    (started,), (ended,) = events(docket, "RunSupervised.v1"), events(docket, "RunUnsupervised.v1")
    assert ended["payload"]["cause"] == "finished"
    billed = to_ms(ended["payload"]["ended_at"]) - to_ms(started["recorded_at"])
    assert billed >= 300  # the agent slept that long inside the supervision
    assert used_ms(docket, run) == billed
    assert used_ms(docket, run) == billed  # and no more later: nobody supervises now


def test_a_killed_supervisor_is_billed_until_its_last_sign_of_life(docket, run, repo):
    launch = subprocess.Popen([sys.executable, "-m", "docket", "worker", "launch", run, "--task", "t1", "--",
                               "sh", "-c", "sleep 600"], cwd=repo, env=docket.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not events(docket, "WorkerLaunched.v1"):
            assert time.monotonic() < deadline and launch.poll() is None, "the worker never launched"
            time.sleep(0.2)
        os.kill(launch.pid, signal.SIGKILL)
        launch.wait()
        reconciled = docket("reconcile", "--apply", "--json").json()["findings"]
        assert {f["kind"] for f in reconciled} == {"unsupervised", "supervisor-gone"}
        (started,), (ended,) = events(docket, "RunSupervised.v1"), events(docket, "RunUnsupervised.v1")
        (granted,) = [e for e in events(docket, "LeaseGranted.v1") if e["payload"]["worker_id"] == "t1"]
        assert ended["payload"]["cause"] == "supervisor-gone"
        assert ended["payload"]["ended_at"] == granted["recorded_at"]  # its last sign of life
        assert to_ms(ended["recorded_at"]) >= to_ms(ended["payload"]["ended_at"])
        billed = to_ms(granted["recorded_at"]) - to_ms(started["recorded_at"])
        assert used_ms(docket, run) == billed
        assert used_ms(docket, run) == billed  # the downtime after the crash is not billed
        assert docket("reconcile", "--json").json()["findings"] == []
    finally:
        if launch.poll() is None:
            launch.kill()
        for p in psutil.process_iter():
            try:
                if p.environ().get("DOCKET_LEDGER") == str(docket.ledger):
                    p.kill()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
