"""`make demo` keeps working: `docket go` with the scripted agent, through the installed CLI, from start to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_demo(tmp_path: Path, *, shim: str | None = None) -> subprocess.CompletedProcess[str]:
    """tests/demo.sh with the venv's docket first on PATH, or a `docket` shim (bash, "$REAL" the real one) before it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    path = [Path(sys.executable).parent]
    if shim is not None:
        folder = tmp_path / "bin"
        folder.mkdir()
        (folder / "docket").write_text(f'#!/usr/bin/env bash\nREAL="{path[0] / "docket"}"\n{shim}\n')
        (folder / "docket").chmod(0o755)
        path.insert(0, folder)
    env["PATH"] = os.pathsep.join([*map(str, path), env.get("PATH", "")])
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    return subprocess.run(["bash", str(ROOT / "tests" / "demo.sh")], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_demo_delivers_three_tasks_verifies_the_receipt_offline_and_resumes_a_crashed_go(tmp_path, data_dir):
    result = run_demo(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out, both = result.stdout, result.stdout + result.stderr
    # docket go: the wrong first attempt was fed back and repaired, the dependent task started from its dependency
    assert "TaskFeedbackRecorded task_id=demo.default generation=1 check=greets" in out
    assert "default: delivered, 2 cycle(s)" in out and "farewell: delivered, 1 cycle(s)" in out
    assert "docket: start demo.cli from demo.default" in out
    assert "$ python3 app.py Ada\nHello, Ada\n" in out  # main and its checkout hold the delivered program
    # the receipt verified with the bundle and the public key only; a forged copy refused
    assert "ok: run demo, integration completed" in out
    assert "docket: error: bad-signature" in both
    # killed at a named crash point, then resumed to the end
    # killed, its driver lease not run out yet: still taken for running
    assert "(killed: exit 137)" in out and re.search(r"^crashed +running ", out, re.MULTILINE)
    assert "run crashed: delivered (completed)" in out
    assert "docket: error: chain-broken: position 8" in both
    tail = out[out.index("finally: the real ledger verifies"):]
    assert "chain intact" in tail and "2 run(s); 0 pending intent(s)" in tail
    assert list((tmp_path / "tmp").iterdir()) == []  # the throwaway repository is cleaned up
    # gc removed what the delivered runs left; and the user's data folder (XDG_DATA_HOME, the test's) never held
    # the workspaces of the repository the demo deleted: the demo's data folder was its own, and went with it
    assert "removed worktree demo.default:" in out and "removed worktree crashed.t1:" in out
    assert not data_dir.exists() or list(data_dir.rglob("*")) == [], list(data_dir.rglob("*"))[:10]


@pytest.mark.slow
def test_demo_stops_with_an_error_when_main_does_not_hold_what_docket_go_delivered(tmp_path):
    """A `docket go` that exits 0 having done nothing: the demo notices instead of showing on."""
    result = run_demo(tmp_path, shim='[ "$1" = go ] && exit 0\nexec "$REAL" "$@"')
    assert result.returncode != 0
    assert "demo: unexpected files on main" in result.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
