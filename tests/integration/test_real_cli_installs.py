"""tests/agents/real_clis.py installs a CLI once, one process at a time, and tells a registry it cannot reach (a
skip, with the reason) from an install that fails (an error). A fake npm stands in for the registry; one test
points the real npm at a port where nothing listens."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ..agents.real_clis import MARKER, CannotInstall, InstallFailed, RealCli, install, installed_or_skip

ROOT = Path(__file__).resolve().parents[2]
FAKE = RealCli("fakeagent", "@docket-tests/fakeagent", "1.2.3", "npm")
# npm install --prefix DIR ... PACKAGE: FAKE_NPM says how it goes; each run appends a line to FAKE_NPM_RUNS.
FAKE_NPM = r"""#!/usr/bin/env python3
import os, sys, time
args = sys.argv[1:]
folder = args[args.index("--prefix") + 1]
with open(os.environ["FAKE_NPM_RUNS"], "a") as runs:
    runs.write(args[-1] + "\n")
mode = os.environ["FAKE_NPM"]
if mode == "unreachable":
    sys.exit("npm error code ENOTFOUND\nnpm error request to https://registry.npmjs.org/x failed, reason: "
             "getaddrinfo ENOTFOUND registry.npmjs.org")
if mode == "broken":
    sys.exit("npm error code 1\nnpm error command failed: node install.cjs")
time.sleep(float(os.environ.get("FAKE_NPM_SLEEP", "0")))
bin_dir = os.path.join(folder, "node_modules", ".bin")
os.makedirs(bin_dir)
program = os.path.join(bin_dir, "fakeagent")
with open(program, "w") as f:
    f.write("#!/bin/sh\necho 'fakeagent " + os.environ.get("FAKE_VERSION", "1.2.3") + "'\n")
os.chmod(program, 0o755)
"""


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    """PATH with the fake npm first, an empty cache, and the file that counts npm's runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text(FAKE_NPM)
    (bin_dir / "npm").chmod(0o755)
    runs = tmp_path / "npm-runs"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKET_AGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_NPM_RUNS", str(runs))
    monkeypatch.setenv("FAKE_NPM", "ok")
    return runs


def npm_runs(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def test_a_cli_is_installed_once_and_its_marker_records_the_install(fake_npm, tmp_path):
    executable = install(FAKE)
    assert executable == tmp_path / "cache" / "fakeagent-1.2.3" / "node_modules" / ".bin" / "fakeagent"
    assert subprocess.run([executable], capture_output=True, text=True).stdout == "fakeagent 1.2.3\n"
    record = json.loads((executable.parents[2] / MARKER).read_text())
    assert record["version"] == "1.2.3" and record["seconds"] >= 0 and record["bytes"] > 0
    assert install(FAKE) == executable
    assert npm_runs(fake_npm) == ["@docket-tests/fakeagent@1.2.3"]


def test_two_processes_installing_at_once_run_the_installer_once(fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_NPM_SLEEP", "1")
    code = ("import sys; from tests.agents.real_clis import install, RealCli; "
            "print(install(RealCli('fakeagent', '@docket-tests/fakeagent', '1.2.3', 'npm')))")
    processes = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], results
    assert len({stdout for stdout, _ in results}) == 1
    assert npm_runs(fake_npm) == ["@docket-tests/fakeagent@1.2.3"]


def test_what_an_interrupted_install_left_is_removed_and_the_install_done_again(fake_npm, tmp_path):
    leftover = tmp_path / "cache" / "fakeagent-1.2.3" / "node_modules" / "half-written"
    leftover.mkdir(parents=True)
    install(FAKE)
    assert not leftover.exists()
    assert len(npm_runs(fake_npm)) == 1


def test_an_unreachable_registry_skips_the_test_saying_why_and_installs_nothing(fake_npm, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NPM", "unreachable")
    with pytest.raises(pytest.skip.Exception, match=r"^@docket-tests/fakeagent@1\.2\.3 cannot be installed: "
                                                    r"registry unreachable: ENOTFOUND"):
        installed_or_skip(FAKE)
    assert not (tmp_path / "cache" / "fakeagent-1.2.3" / MARKER).exists()


def test_a_failing_install_is_an_error_not_a_skip(fake_npm, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NPM", "broken")
    with pytest.raises(InstallFailed, match=r"(?s)exited 1 .*command failed: node install\.cjs"):
        installed_or_skip(FAKE)
    assert not (tmp_path / "cache" / "fakeagent-1.2.3" / MARKER).exists()


def test_an_installed_program_of_another_version_is_an_error(fake_npm, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_VERSION", "9.9.9")
    with pytest.raises(InstallFailed, match="says 'fakeagent 9.9.9', not 1.2.3"):
        install(FAKE)
    assert not (tmp_path / "cache" / "fakeagent-1.2.3" / MARKER).exists()


def test_without_npm_the_npm_clis_are_skipped_saying_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    monkeypatch.setenv("DOCKET_AGENT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(pytest.skip.Exception, match="cannot be installed: npm is not installed"):
        installed_or_skip(FAKE)


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_the_real_npm_facing_a_registry_that_does_not_answer_is_told_apart(tmp_path):
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "npm_config_registry": f"http://127.0.0.1:{port}/", "npm_config_fetch_retries": "0",
           "npm_config_cache": str(tmp_path / "npm-cache")}
    with pytest.raises(CannotInstall, match="registry unreachable: ECONNREFUSED"):
        install(FAKE, cache=tmp_path / "cache", env=env, progress=lambda line: None)


def test_the_real_pip_facing_an_index_that_does_not_answer_is_told_apart(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"http://127.0.0.1:{port}/simple", PIP_RETRIES="1")
    nothing = RealCli("nothing", "docket-tests-no-such-package", "1.0", "pip")
    with pytest.raises(CannotInstall, match="registry unreachable: NewConnectionError"):
        install(nothing, cache=tmp_path / "cache", env=env, progress=lambda line: None)
