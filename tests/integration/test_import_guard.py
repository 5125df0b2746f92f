"""The import guard (world/import_guard.py) in real Python processes: an import from the user's checkout is refused
and reported on the stderr the process started with, even when the code swallows the ImportError; the execution
(inside the checkout too) and the interpreter's own installation import freely; another sitecustomize still runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from docket.adapters.world.workspaces.import_guard import MARKER, guard_environment, guard_folder, violations


def _run(tmp_path: Path, code: str, *, checkout: Path, execution: Path, pythonpath: str) -> tuple[int, Path]:
    log = tmp_path / "check.log"
    env = guard_environment({"PATH": os.environ["PATH"], "PYTHONPATH": pythonpath},
                            folder=guard_folder(tmp_path / "docket"), checkout=checkout, execution=str(execution))
    with open(log, "wb") as out:
        done = subprocess.run([sys.executable, "-c", code], cwd=execution, env=env, stdout=out, stderr=out)
    return done.returncode, log


def _package(root: Path, word: str) -> None:
    (root / "greeting").mkdir(parents=True)
    (root / "greeting" / "__init__.py").write_text(f"WORD = {word!r}\n")


def test_a_swallowed_refusal_is_still_in_the_log_naming_the_path(tmp_path):
    checkout = tmp_path / "checkout"
    _package(checkout / "src", "checkout's")
    execution = tmp_path / "execution"
    execution.mkdir()
    code = ("import sys\ntry:\n    import greeting\nexcept ImportError as e:\n    print('fell back', file=sys.stderr)\n"
            "import json\nprint('json imported')\n")
    returncode, log = _run(tmp_path, code, checkout=checkout, execution=execution, pythonpath=str(checkout / "src"))
    assert returncode == 0 and "json imported" in log.read_text()
    (refused,) = violations(log)
    assert str(checkout / "src" / "greeting") in refused and "module greeting" in refused
    assert log.read_text().count(MARKER) == 1


def test_the_execution_inside_the_checkout_imports_freely_and_another_sitecustomize_runs(tmp_path):
    checkout = tmp_path / "checkout"
    execution = checkout / ".git" / "docket" / "executions" / "x"
    _package(execution / "src", "execution's")
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    code = "import os, greeting\nprint(greeting.WORD, os.environ.get('CHAINED'))\n"
    returncode, log = _run(tmp_path, code, checkout=checkout, execution=execution,
                           pythonpath=os.pathsep.join([str(execution / "src"), str(other)]))
    assert (returncode, log.read_text().strip()) == (0, "execution's yes")
    assert violations(log) == []


def test_an_import_from_the_checkout_fails(tmp_path):
    checkout = tmp_path / "checkout"
    _package(checkout, "checkout's")
    execution = tmp_path / "execution"
    execution.mkdir()
    returncode, log = _run(tmp_path, "import greeting", checkout=checkout, execution=execution,
                           pythonpath=str(checkout))
    assert returncode == 1 and "ImportError: " + MARKER in log.read_text()
    assert violations(log) and str(checkout / "greeting") in violations(log)[0]


def test_a_folder_the_checks_environment_allows_imports_freely(tmp_path):
    checkout = tmp_path / "checkout"
    _package(checkout / "vendor", "vendored")
    execution = tmp_path / "execution"
    execution.mkdir()
    log = tmp_path / "check.log"
    env = guard_environment({"PATH": os.environ["PATH"], "PYTHONPATH": str(checkout / "vendor"),
                             "DOCKET_IMPORT_ALLOW": str(checkout / "vendor")},
                            folder=guard_folder(tmp_path / "docket"), checkout=checkout, execution=str(execution))
    assert env["DOCKET_IMPORT_ALLOW"] == os.pathsep.join([str(execution), str(checkout / "vendor")])
    with open(log, "wb") as out:
        done = subprocess.run([sys.executable, "-c", "import greeting; print(greeting.WORD)"], cwd=execution,
                              env=env, stdout=out, stderr=out)
    assert (done.returncode, log.read_text().strip()) == (0, "vendored")
