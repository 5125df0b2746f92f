"""Checks as an ordinary machine runs them: PYTHONDONTWRITEBYTECODE unset, so importing the repository's code
writes __pycache__, and pytest writes .pytest_cache and its report. None of that is a change of the commit a check
ran on; a check that changes a tracked file still fails, and the agent's feedback names the file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world

PACKAGE = {
    "app.py": "from pkg.greet import greet\n\nprint(greet('world'))\n",
    "pkg/__init__.py": "",
    "pkg/greet.py": 'def greet(name):\n    return "hello"\n',
    "tests/test_greet.py": "from pkg.greet import greet\n\n\ndef test_greet():\n    assert greet('x').startswith('hello')\n",
}

TASKS = r"""
[[tasks]]
id = "name"
title = "greet by name"
prompt = '''Greet by name.
write pkg/greet.py: def greet(name):\n    return f"hello, {name}"
append tests/test_greet.py: def test_name():\n    assert greet('ada') == 'hello, ada'
'''
"""


def _default_pytest_check() -> str:
    """The pytest check `docket init` writes commented out, uncommented, with this interpreter."""
    from docket.domain.config import DEFAULT_TOML

    lines = DEFAULT_TOML.splitlines()
    start = lines.index("# [checks.tests]")
    block = [line.removeprefix("# ") for line in lines[start:start + 3]]
    return "\n".join(block).replace('["python"', json.dumps([sys.executable])[:-1]) + "\n"


def _world(tmp_path: Path, extra: str):
    world = make_go_world(tmp_path, tasks=TASKS, extra_config=extra)
    for rel, text in PACKAGE.items():
        (world.repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (world.repo / rel).write_text(text)
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-q", "-m", "a package and its tests")
    world.env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a laptop
    return world


CHECKS = f'''
[checks.imports]
command = ["{sys.executable}", "-c", "import pkg.greet"]
'''


def test_a_check_that_imports_the_code_and_the_default_pytest_check_deliver_on_an_ordinary_machine(tmp_path: Path):
    world = _world(tmp_path, CHECKS + "\n" + _default_pytest_check())
    assert "PYTHONDONTWRITEBYTECODE" not in world.env
    done = world.go("run-laptop", "--target", "main")
    summary = json.loads(done.stdout)
    assert done.returncode == 0, (done.stderr, summary)
    (row,) = summary["tasks"]
    assert row["result"] == "delivered" and row["cycles"] == 1
    assert row["checks"] == {"compiles": "passed", "imports": "passed", "tests": "passed"}
    assert "hello, {name}" in world.file_at("main", "pkg/greet.py")
    shown = git(world.repo, "ls-tree", "-r", "--name-only", "main")
    assert "__pycache__" not in shown and ".pytest_cache" not in shown and "junit.xml" not in shown


def test_a_check_that_changes_a_tracked_file_fails_and_the_feedback_names_the_file(tmp_path: Path):
    sneaky = f'''
[checks.sneaky]
command = ["{sys.executable}", "-c", "import pkg.greet; open('pkg/greet.py', 'a').write('# tampered')"]
'''
    world = _world(tmp_path, sneaky)
    done = world.go("run-sneaky", "--target", "main", "--cycles", "1")
    summary = json.loads(done.stdout)
    assert done.returncode == 6, (done.stderr, summary)
    (row,) = summary["tasks"]
    assert row["result"] == "failed" and row["checks"]["sneaky"] == "failed"
    (feedback,) = world.events("TaskFeedbackRecorded")
    text = feedback["payload"]["feedback"]
    assert "execution-mutated" in text and "tracked pkg/greet.py was changed" in text
    assert "__pycache__" not in text
