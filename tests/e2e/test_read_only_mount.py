"""A ledger on a read-only mount can still be verified, logged and shown (issue 5, item 13).

A real tmpfs is mounted in tmp_path, a ledger is made there through the CLI,
and the mount is remounted read-only: SQLite opens the ledger immutable, and
status builds its views in memory when it cannot write them beside it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import Docket


def remount_read_only(point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)


@pytest.mark.parametrize("views", ["kept", "missing"])
def test_a_ledger_on_a_read_only_mount_can_be_verified_logged_and_shown(docket: Docket, tmpfs: Path, views: str):
    ledger = str(tmpfs / "ledger.sqlite")
    docket("init", "--ledger", ledger)
    docket("run", "open", "--target", "main", "--goal", "read me", "--id", "r1", "--ledger", ledger)
    docket("task", "plan", "r1", "--title", "t", "--ledger", ledger)
    expected = docket("verify", "--json", "--ledger", ledger).json()
    if views == "missing":
        (tmpfs / "views.sqlite").unlink()
    remount_read_only(tmpfs)
    with pytest.raises(OSError):
        (tmpfs / "probe").write_text("x")

    assert docket("verify", "--json", "--ledger", ledger).json() == expected
    log = docket("log", "--json", "--ledger", ledger).json()
    assert log["head"] == expected["events"]
    status = docket("status", "r1", "--json", "--ledger", ledger).json()
    assert status["run"]["goal"] == "read me" and status["position"] == expected["events"]
    assert docket("status", "--ledger", ledger).returncode == 0


def test_a_write_ahead_log_left_by_a_crash_is_still_read(docket: Docket, tmpfs: Path):
    """An immutable open would ignore the -wal file; events committed only there must still be seen."""
    ledger = str(tmpfs / "ledger.sqlite")
    docket("init", "--ledger", ledger)
    follower = subprocess.Popen([sys.executable, "-m", "docket", "log", "--follow", "--json", "--ledger", ledger],
                                cwd=docket.cwd, env=docket.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert follower.stdout.readline()  # it holds the ledger open: the writers below leave their pages in the WAL
        docket("run", "open", "--target", "main", "--goal", "in the wal", "--id", "r1", "--ledger", ledger)
        expected = docket("verify", "--json", "--ledger", ledger).json()
    finally:
        follower.send_signal(signal.SIGKILL)
        follower.wait()
    assert (tmpfs / "ledger.sqlite-wal").stat().st_size > 0
    remount_read_only(tmpfs)
    assert docket("verify", "--json", "--ledger", ledger).json() == expected
    assert docket("status", "r1", "--json", "--ledger", ledger).json()["run"]["goal"] == "in the wal"
