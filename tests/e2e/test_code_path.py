"""The code path of one `docket go` task (tests/code_path.py, named in docs/architecture.md) still runs and names
the modules the map walks through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_task_runs_through_the_service_layer_and_the_git_ports():
    shown = subprocess.run([sys.executable, "-m", "tests.code_path"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, shown.stderr
    files = {line.strip() for line in shown.stdout.splitlines() if line.startswith("  ")}
    assert {"cli/supervise/go.py", "adapters/service_layer/go/drive.py", "adapters/service_layer/go/start.py",
            "adapters/service_layer/go/task.py", "adapters/service_layer/go/delivery.py",
            "adapters/world/git/capture.py", "adapters/world/git/candidates.py", "adapters/world/git/merge.py",
            "adapters/world/git/integration_refs.py", "domain/merge_queue/target_move.py"} <= files, sorted(files)
    assert all(f.split("/")[0] in ("domain", "projections", "adapters", "cli") for f in files)
    assert f"{len(files)} docket source files ran a function for one task" in shown.stdout
