"""`docket log --follow` streams new events; long work shows progress on a terminal only."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.domain.events import TaskPlanned

T0 = "2026-01-01T00:00:00.000Z"


def _sigint_as_in_a_terminal() -> None:
    """A foreground command gets Ctrl-C; one started by a parent that ignores SIGINT (pytest in the
    background, `docket log --follow &` in a script) inherits the ignore, which docket rightly keeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_log_follow_prints_events_as_they_arrive(docket):
    docket("init")
    follower = subprocess.Popen([sys.executable, "-m", "docket", "log", "--follow", "--json"], cwd=docket.cwd,
                                env=docket.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_sigint_as_in_a_terminal)
    try:
        first = json.loads(follower.stdout.readline())
        assert first["position"] == 1 and first["type"] == "LedgerCreated.v2"
        docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
        docs = [json.loads(follower.stdout.readline()) for _ in range(3)]
        assert [d["type"] for d in docs] == ["RunOpened.v2", "RunBasePinRequested.v1", "RunBasePinned.v1"]
        assert [d["position"] for d in docs] == [2, 3, 4]  # each event once, in order
        follower.send_signal(signal.SIGINT)
        assert follower.wait(30) == 0 and follower.stderr.read() == ""  # Ctrl-C just stops following
    finally:
        follower.kill()
        follower.wait()


def _many_events(path, count: int) -> None:
    ledger = Ledger(path)
    ledger.initialise(T0)
    batch = [TaskPlanned(stream=f"task:t{i}", version=1, recorded_at=T0, task_id=f"t{i}", run_id="r", title="x")
             for i in range(count)]
    for start in range(0, count, 5000):
        ledger.append(batch[start:start + 5000])
    ledger.close()


def test_verify_shows_progress_on_a_terminal_and_none_when_piped(docket):
    _many_events(docket.ledger, 25_000)
    piped = docket("verify")
    assert piped.stderr == ""

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "docket", "verify"], cwd=docket.cwd, env=docket.env,
                            stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(60)
    os.close(leader)
    assert proc.returncode == 0
    counts = [int(n) for n in re.findall(rb"\rverifying (\d+)/25001", seen)]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[-1] == 25_001
    assert seen.endswith(b"\r\x1b[K")  # the progress line is cleared when done
