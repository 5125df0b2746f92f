"""The wheel as a user installs it: built from the repository, installed (not editable) with its dependencies in a
fresh virtual environment, and run from there: `docket --version`, `docket mcp --help`, `docket serve` answering its
page and a static file, and a `docket go` that delivers a task. A package or data file the packaging leaves out
(`pip install .` once lacked docket.cli.web, and `docket serve` exited 70) fails here, and the wheel must carry every
file of domain/, projections/, adapters/ and cli/.

The installed docket runs outside the repository, without PYTHONPATH, so it cannot import the repository's code. The
wheel and the environment are made once for the module (once for the session under pytest-xdist: the workers share
them through a lock); with no package index to install the dependencies from, the tests skip and say so.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import make_go_world
from tests.e2e.test_serve import Served

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TREES = ("domain", "projections", "adapters", "cli")  # what the wheel installs under docket (cli/_root is docket)
BUILD_FILES = ("pyproject.toml", "README.md")
ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "add the greeting"\nprompt = "write greet.py: print(1)"\n'
# what pip says when it cannot get a dependency (no index, no network): a skip, not a failure
UNREACHABLE = ("No matching distribution found", "Could not find a version that satisfies",
               "Failed to establish a new connection", "Temporary failure in name resolution", "Network is unreachable")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    env: dict[str, str]  # no PYTHONPATH, the environment's bin first on PATH

    @property
    def docket(self) -> Path:
        return self.venv / "bin" / "docket"

    def run(self, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.docket), *args], cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *(p for p in env.get("PATH", "").split(os.pathsep)
                                                        if p and not p.startswith(str(ROOT)))])
    return env


def _build_and_install(folder: Path) -> dict[str, str]:
    """Build the wheel from a copy of the repository's packaging (setuptools leaves build/ and *.egg-info behind)
    and install it in a fresh environment: {"wheel", "venv"}, or {"skip": why}."""
    shutil.rmtree(folder, ignore_errors=True)
    source = folder / "source"
    for name in TREES:
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, source / name)
    venv = folder / "venv"
    env = _clean_env(venv)
    offline = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel"))  # the test extra brings them
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder / "dist"),
                            *(["--no-build-isolation"] if offline else []), str(source)],
                           cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and any(marker in built.stderr for marker in UNREACHABLE):
        return {"skip": f"cannot build the wheel: no package index for its build requirements ({built.stderr[-300:]})"}
    assert built.returncode == 0, built.stderr
    (wheel,) = (folder / "dist").glob("docket-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, capture_output=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=folder,
                               env=env, capture_output=True, text=True, timeout=600)
    if installed.returncode != 0 and any(marker in installed.stderr for marker in UNREACHABLE):
        return {"skip": f"cannot install the wheel's dependencies: no package index ({installed.stderr[-300:]})"}
    assert installed.returncode == 0, installed.stderr
    return {"wheel": str(wheel), "venv": str(venv)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: the session's folder
    with open(shared / "wheel-install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        outcome = shared / "wheel-install.json"
        if not outcome.exists():
            outcome.write_text(json.dumps(_build_and_install(shared / "wheel-install")))
        made = json.loads(outcome.read_text())
    if "skip" in made:
        pytest.skip(made["skip"])
    venv = Path(made["venv"])
    return Installed(Path(made["wheel"]), venv, _clean_env(venv))


def _wheel_name(path: Path) -> str:
    relative = path.relative_to(ROOT)
    if relative.parts[:2] == ("cli", "_root"):
        return "/".join(("docket", *relative.parts[2:]))
    return "/".join(("docket", *relative.parts))


def test_the_wheel_carries_every_file_of_the_packages_and_nothing_of_the_tests(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    files = [p for tree in TREES for p in (ROOT / tree).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    assert any(p.suffix != ".py" for p in files)  # the web view's static files, at least
    missing = sorted(_wheel_name(p) for p in files if _wheel_name(p) not in names)
    assert missing == [], "not in the wheel: pyproject.toml lists the packages and their data files"
    assert "docket/cli/web/static/app.js" in names and "docket/__main__.py" in names
    assert not [n for n in names if n.split("/")[0] in ("tests", "bench", "docs", "examples")
                or n.startswith(("docket/tests/", "docket/bench/", "docket/cli/_root/"))]


def test_the_installed_docket_is_the_wheels_and_tells_its_version(installed, tmp_path):
    python = installed.venv / "bin" / "python"
    shown = subprocess.run([str(python), "-c", "import docket, docket.cli.web.app as web; "
                            "print(docket.__file__); print(web.STATIC.is_dir())"],
                           cwd=tmp_path, env=installed.env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    location, static = shown.stdout.split()
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          cwd=tmp_path, env=installed.env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(location) == Path(site) / "docket" / "__init__.py" and static == "True"
    assert not list(Path(site).glob("__editable__*"))  # not an editable install pointing back at the repository
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    done = installed.run("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"docket {version}", done.stderr


def test_the_installed_docket_mcp_shows_its_help(installed, tmp_path):
    done = installed.run("mcp", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: docket mcp")


def _world(installed: Installed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kwargs):  # noqa: ANN003, ANN202
    """A go world (tests/e2e/go_world.py: the scripted agent, a check; XDG_CONFIG_HOME trusting its docket.toml)
    whose every docket command, `docket init` first, is the installed one, in the installed one's environment."""
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", installed.env["PATH"])
    return make_go_world(tmp_path, program=(str(installed.docket),), **kwargs)


def test_the_installed_docket_serves_its_page_and_static_files(installed, tmp_path, monkeypatch):
    world = _world(installed, tmp_path, monkeypatch)
    served = Served(world)  # the installed docket serve --port 0, its address read from its first line
    try:
        status, _, page = served.request("/")
        assert status == 200 and "<html" in page.lower()
        for path in ("/static/app.js", "/static/style.css"):
            status, headers, body = served.request(path)
            assert status == 200 and body, path
    finally:
        err = served.stop()
    assert "Traceback" not in err, err


def test_the_installed_docket_go_delivers_a_task(installed, tmp_path, monkeypatch):
    world = _world(installed, tmp_path, monkeypatch, tasks=ONE_TASK)
    done = world.go("r1")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["status"]) == ("delivered", "completed")
    assert [(row["task"], row["result"], row["checks"]) for row in summary["tasks"]] == [
        ("greet", "delivered", {"compiles": "passed"})]
    assert world.file_at("main", "greet.py") == "print(1)\n"
    assert git(world.repo, "rev-parse", "main") == summary["target_commit"]
    assert world.run("verify").returncode == 0
