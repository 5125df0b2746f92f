"""PostgreSQL's driver is an extra (`docket[postgres]`): every module but the two that speak to PostgreSQL imports
without it, so that an import moved to a module's top can never make a plain install fail (missing-dependency)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"domain": "docket.domain", "projections": "docket.projections", "adapters": "docket.adapters",
           "cli": "docket.cli"}
NEEDS_THE_DRIVER = ["docket.adapters.world.ledger.postgres_reader", "docket.adapters.world.ledger.postgres_store"]

PROBE = """
import importlib, json, sys
sys.modules["psycopg"] = None  # as on a machine without the extra: importing it raises ImportError
failed = []
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:
        failed.append(name)
print(json.dumps(sorted(failed)))
"""


def _modules() -> list[str]:
    names = []
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "_root" in path.parts:
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            names.append(".".join((package, *parts)).removesuffix(".__init__"))
    return sorted(names)


def test_only_the_postgres_modules_need_its_driver():
    names = _modules()
    assert len(names) > 200
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout) == NEEDS_THE_DRIVER
