"""A Python check tests the execution, never the user's checkout: with the user's virtual environment (inside the
checkout) holding an editable install of the checkout's own package, a pytest check that imports the package fails
instead of passing on the checkout's files (loudly, naming the checkout's path, where the checkout can be seen; with
the sandbox's private mounts it cannot, and the package is not found); the same check importing the package
from its execution (PYTHONPATH={worktree}/src) passes, and the work lands."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world

TASKS = '''\
[[tasks]]
id = "note"
title = "a note"
prompt = "write notes.txt: a note"
'''


def _world(tmp_path: Path, env: str) -> GoWorld:
    repo_venv = tmp_path / "repo" / ".venv"
    check = f'''
[checks.tests]
command = ["{repo_venv / "bin" / "python"}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
timeout = "2m"
read = ["{sysconfig.get_path("purelib")}"]  # pytest, which the venv borrows from the interpreter running the tests
{env}
'''
    world = make_go_world(tmp_path, tasks=TASKS)
    repo = world.repo
    config = (repo / "docket.toml").read_text()
    (repo / "docket.toml").write_text(config[:config.index("[checks.compiles]")] + check)  # the only check
    (repo / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                         '"setuptools.build_meta"\n\n[project]\nname = "greeting"\nversion = "0.1"\n\n'
                                         '[tool.setuptools.packages.find]\nwhere = ["src"]\n')
    (repo / "src" / "greeting").mkdir(parents=True)
    (repo / "src" / "greeting" / "__init__.py").write_text('WORD = "hello"\n')
    (repo / "tests").mkdir()
    (repo / "tests" / "test_greeting.py").write_text(
        "import greeting\n\n\ndef test_the_word():\n    assert greeting.WORD == 'hello'\n")
    (repo / ".gitignore").write_text("tasks.toml\n.venv/\n*.egg-info/\n__pycache__/\nbuild/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the greeting package")
    # the user's virtual environment, inside the checkout, with the checkout's package installed editable (pytest
    # and setuptools come from the interpreter running these tests)
    subprocess.run([sys.executable, "-m", "venv", str(repo_venv)], check=True, capture_output=True)
    site = subprocess.run([str(repo_venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = subprocess.run([str(repo_venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index",
                                "--no-build-isolation", "--no-deps", "-e", str(repo)], capture_output=True, text=True)
    if installed.returncode != 0:
        pytest.skip(f"pip cannot make an editable install here: {installed.stderr[-500:]}")
    imported = subprocess.run([str(repo_venv / "bin" / "python"), "-c", "import greeting; print(greeting.__file__)"],
                              cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    assert imported == str(repo / "src" / "greeting" / "__init__.py")  # the editable install names the checkout
    return world


def test_a_check_importing_the_checkout_through_an_editable_install_fails_naming_the_path(tmp_path):
    world = _world(tmp_path, env="")
    done = world.go("imp1", "--cycles", "1")
    assert done.returncode != 0, done.stdout
    failed = [e["payload"] for e in world.events("CheckFailed")]
    assert failed and not world.events("CheckPassed")
    checkout_file = str(world.repo / "src" / "greeting" / "__init__.py")
    for result in failed:
        if result["code"] == "import-outside-execution":  # the import guard saw it reach for the checkout
            assert checkout_file in result["message"] and checkout_file in result["tail"]
        else:  # the launch's private mounts hide the checkout (private_mounts.py): nothing there to import
            assert "No module named 'greeting'" in result["tail"], result
    assert "notes.txt" not in git(world.repo, "ls-tree", "--name-only", "main").split()


def test_the_same_check_importing_from_its_execution_passes_and_the_work_lands(tmp_path):
    world = _world(tmp_path, env='env = { PYTHONPATH = "{worktree}/src" }')
    done = world.go("imp2", "--cycles", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert world.events("CheckPassed") and not world.events("CheckFailed")
    assert world.file_at("main", "notes.txt") == "a note\n"
    summary = json.loads(done.stdout)
    assert summary["tasks"][0]["result"] == "delivered"
