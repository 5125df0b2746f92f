"""`make demo` keeps working: the scripted scenario runs to the end against the installed CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _slow_machine(folder: Path) -> Path:
    """A `docket` that starts each `lease expire` 3.5 s late: past the demo's 3 s lease, whatever the clock."""
    folder.mkdir()
    shim, real = folder / "docket", Path(sys.executable).parent / "docket"
    shim.write_text(f'#!/usr/bin/env bash\ncase "$*" in "lease expire"*) sleep 3.5 ;; esac\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    return folder


@pytest.mark.slow
def test_demo_script_runs_to_verify_and_status(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    path = [_slow_machine(tmp_path / "bin"), Path(sys.executable).parent]
    env["PATH"] = os.pathsep.join([*map(str, path), env.get("PATH", "")])
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    result = subprocess.run(["bash", str(ROOT / "tests" / "demo.sh")], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    out = result.stdout
    assert "docket: error: unknown-branch" in result.stdout + result.stderr
    assert "docket: error: chain-broken: position 8" in result.stdout + result.stderr
    assert "RunBasePinned.v1" in out  # the crashed run was finished by replay --apply
    assert "lease-not-expired" in result.stderr and "recorded as expired" in out
    assert "status --json: crashed aborted" in out
    assert "make app.py greet by name" in out and "WorkerExited.v1" in out  # the agent read its prompt and ended
    assert "[docket/demo/t2]" in out  # its worktree, on its own branch
    assert "greets #1: passed; execution removed" in out  # a check on the candidate its exit pinned
    tail = out[out.index("finally: the real ledger verifies"):]
    assert "ok: 45 events, chain intact" in tail and "3 run(s); 0 pending intent(s)" in tail
    assert list((tmp_path / "tmp").iterdir()) == []  # the throwaway repository is cleaned up
