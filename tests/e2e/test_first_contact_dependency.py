"""A PostgreSQL ledger named (DOCKET_DATABASE_URL) on a machine without the `postgres` extra is a missing install the
user can fix, said in one line with what to install (exit 2): never "a bug in docket" (exit 70)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

URL = "postgresql://docket@127.0.0.1:1/docket"


def _without(tmp_path: Path, module: str) -> str:
    """A folder that, first on PYTHONPATH, makes `import <module>` fail as it does where it is not installed."""
    folder = tmp_path / f"without-{module}"
    (folder / module).mkdir(parents=True)
    (folder / module / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{module}'\", name={module!r})\n")
    return str(folder)


@pytest.mark.parametrize("module", ["psycopg", "psycopg_pool"])
@pytest.mark.parametrize("args", [("status",), ("verify",), ("init",), ("log", "--json")])
def test_a_postgresql_ledger_without_the_postgres_extra_says_what_to_install(repo: Path, tmp_path: Path,
                                                                             module: str, args: tuple[str, ...]):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    env.update(DOCKET_DATABASE_URL=URL, PYTHONPATH=os.pathsep.join([_without(tmp_path, module),
                                                                     env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "docket", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("docket: error: missing-dependency: "), line
    assert "pip install 'docket[postgres]'" in line and "DOCKET_DATABASE_URL" in line
