"""`make demo-fleet` keeps working: two clones on one PostgreSQL ledger and one bare remote, beta standing by while
alpha drives, then taking the run over once alpha is killed and its lease expires."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_fleet_demo_delivers_both_runs_with_one_receipt_each():
    from tests import postgres_cluster

    missing = postgres_cluster.available()
    if missing:
        pytest.skip(f"PostgreSQL: {missing}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["DOCKET_PYTHON"] = sys.executable
    env.pop("TMPDIR", None)  # the system's: the cluster's server (the postgres user, under root) must reach it
    result = subprocess.run(["bash", str(ROOT / "tests" / "demo_fleet.sh")], env=env, capture_output=True,
                            text=True, timeout=600)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "standing by: driver/first is leased" in out and "by a process of another host" in out
    assert "run first: delivered (completed)" in out
    assert "(killed: exit 137)" in out and "standing by: driver/second" in out
    assert "run second: delivered (completed)" in out  # beta's supervisor, once alpha's lease expired
    heads = [line for line in out.splitlines() if line.startswith("ok: ") and "chain intact" in line]
    assert len(heads) == 2 and heads[0] == heads[1]  # one ledger, verified from either clone
