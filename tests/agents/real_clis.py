"""The real agent CLIs the tests run: aider (pip), Codex CLI and Claude Code (npm), pinned, installed once.

Each goes into its own folder of the cache ($DOCKET_AGENT_CACHE, else ~/.cache/docket-agents),
`<cache>/<name>-<version>/`: aider into a venv of its own there (its many dependencies never touch docket's), the
other two with `npm install --prefix`. The folder is complete once its marker file is written, after the installed
program answered `--version`; a file lock keeps two processes from installing the same CLI at once. The fixtures skip
a test, saying why, only when the registry cannot be reached or npm is missing; any other failure is an error.

`python tests/agents/real_clis.py --install [NAME ...]` installs them (CI does, before `make test`) and prints how
long each took and its size.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

MARKER = "installed.json"
INSTALL_TIMEOUT_S = 30 * 60
VERSION_TIMEOUT_S = 120
# What pip and npm print when they cannot reach the registry at all (as opposed to a failing build or package).
_UNREACHABLE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH"
                          r"|NewConnectionError|ConnectTimeoutError|ReadTimeoutError|ProxyError"
                          r"|Temporary failure in name resolution|Name or service not known|Network is unreachable")


@dataclass(frozen=True)
class RealCli:
    name: str  # the executable's name, as docs/agents.md's command calls it
    package: str  # its name in its registry
    version: str  # pinned exactly
    installer: Literal["pip", "npm"]

    @property
    def pinned(self) -> str:
        return f"{self.package}=={self.version}" if self.installer == "pip" else f"{self.package}@{self.version}"

    def folder(self, cache: Path) -> Path:
        return cache / f"{self.name}-{self.version}"

    def executable(self, cache: Path) -> Path:
        if self.installer == "pip":
            return self.folder(cache) / "venv" / "bin" / self.name
        return self.folder(cache) / "node_modules" / ".bin" / self.name


AIDER = RealCli("aider", "aider-chat", "0.86.2", "pip")
CODEX = RealCli("codex", "@openai/codex", "0.169.0", "npm")
CLAUDE = RealCli("claude", "@anthropic-ai/claude-code", "2.1.332", "npm")
REAL_CLIS = {cli.name: cli for cli in (AIDER, CODEX, CLAUDE)}


class CannotInstall(Exception):
    """Nothing wrong with the CLI or docket: this machine cannot install it (registry unreachable, npm missing)."""


class InstallFailed(Exception):
    """The installer ran and failed, or the installed program does not run."""


def cache_dir() -> Path:
    configured = os.environ.get("DOCKET_AGENT_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "docket-agents"


def install(cli: RealCli, cache: Path | None = None, env: Mapping[str, str] | None = None,
            progress=lambda line: print(line, file=sys.stderr, flush=True)) -> Path:
    """The path of cli's executable, installed into cache first unless its marker says it is there.

    env replaces the installer's environment (the tests point it at a registry that cannot be reached).
    """
    cache = cache or cache_dir()
    folder, executable = cli.folder(cache), cli.executable(cache)
    if (folder / MARKER).is_file():
        return executable
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{folder.name}.lock"):
        if (folder / MARKER).is_file():  # another process installed it while this one waited
            return executable
        if cli.installer == "npm" and shutil.which("npm", path=(env or os.environ).get("PATH")) is None:
            raise CannotInstall("npm is not installed")
        shutil.rmtree(folder, ignore_errors=True)  # what an interrupted install left
        folder.mkdir()
        log = folder / "install.log"
        progress(f"installing {cli.pinned} into {folder} (log: {log})")
        started = time.monotonic()
        for argv in _install_steps(cli, folder):
            _run(argv, log, env)
        seconds = time.monotonic() - started
        version = _version(executable)
        if cli.version not in version:
            raise InstallFailed(f"{executable} --version says {version!r}, not {cli.version}")
        size = disk_size(folder)
        (folder / MARKER).write_text(json.dumps({"package": cli.package, "version": cli.version, "seconds":
                                                 round(seconds, 1), "bytes": size}) + "\n")
        progress(f"installed {cli.pinned} in {seconds:.0f} s, {size / 2**20:.0f} MiB")
    return executable


def installed_record(cli: RealCli, cache: Path | None = None) -> dict | None:
    """What the marker recorded of cli's install (seconds, bytes), or None when it is not installed."""
    marker = cli.folder(cache or cache_dir()) / MARKER
    return json.loads(marker.read_text()) if marker.is_file() else None


def disk_size(folder: Path) -> int:
    """The bytes folder takes on disk, as du counts them: blocks, each hard-linked file once."""
    blocks = {}
    for entry in _files(folder):
        status = entry.stat(follow_symlinks=False)
        blocks[status.st_dev, status.st_ino] = status.st_blocks
    return 512 * sum(blocks.values())


def _files(folder: Path) -> Iterator[os.DirEntry]:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                yield from _files(Path(entry.path))
            else:
                yield entry


def _install_steps(cli: RealCli, folder: Path) -> list[list[str]]:
    if cli.installer == "pip":
        venv = folder / "venv"
        return [[sys.executable, "-m", "venv", str(venv)],
                [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--progress-bar", "off",
                 "--disable-pip-version-check", cli.pinned]]
    return [["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--no-update-notifier",
             cli.pinned]]


def _run(argv: list[str], log: Path, env: Mapping[str, str] | None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  env=None if env is None else dict(env), timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise InstallFailed(f"{argv[0]} did not finish in {INSTALL_TIMEOUT_S} s (log: {log})") from None
    if proc.returncode != 0:
        output = log.read_text(errors="replace")
        tail = "\n".join(output.splitlines()[-15:])
        unreachable = _UNREACHABLE.search(output)
        if unreachable:
            raise CannotInstall(f"registry unreachable: {unreachable.group(0)} (log: {log})")
        raise InstallFailed(f"{' '.join(argv)} exited {proc.returncode} (log: {log}):\n{tail}")


def _version(executable: Path) -> str:
    """What executable --version prints, run with a scratch home so nothing is written into the user's."""
    with tempfile.TemporaryDirectory(prefix="docket-agent-home-") as home:
        env = {**os.environ, "HOME": home, "CODEX_HOME": home, "CLAUDE_CONFIG_DIR": home}
        try:
            proc = subprocess.run([str(executable), "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, env=env, timeout=VERSION_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InstallFailed(f"{executable} --version: {e}") from None
    if proc.returncode != 0:
        raise InstallFailed(f"{executable} --version exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout.strip()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def installed_or_skip(cli: RealCli) -> Path:
    try:
        return install(cli)
    except CannotInstall as e:
        pytest.skip(f"{cli.pinned} cannot be installed: {e}")


@pytest.fixture(scope="session")
def aider_cli() -> Path:
    """The path of aider 0.86.2 (installed into the cache on first use)."""
    return installed_or_skip(AIDER)


@pytest.fixture(scope="session")
def codex_cli() -> Path:
    """The path of Codex CLI 0.169.0 (installed into the cache on first use)."""
    return installed_or_skip(CODEX)


@pytest.fixture(scope="session")
def claude_cli() -> Path:
    """The path of Claude Code 2.1.332 (installed into the cache on first use)."""
    return installed_or_skip(CLAUDE)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--install" or any(name not in REAL_CLIS for name in argv[1:]):
        print(f"usage: {Path(__file__).name} --install [{' '.join(REAL_CLIS)}]", file=sys.stderr)
        return 2
    failed = False
    for name in argv[1:] or REAL_CLIS:
        cli = REAL_CLIS[name]
        try:
            install(cli)
        except CannotInstall as e:
            print(f"real agent CLIs: SKIPPED {cli.pinned}: {e}; its tests will be skipped", flush=True)
            continue
        except InstallFailed as e:
            print(f"real agent CLIs: FAILED {cli.pinned}: {e}", flush=True)
            failed = True
            continue
        record = installed_record(cli)
        print(f"real agent CLIs: {cli.pinned} ready at {cli.executable(cache_dir())} (installed in "
              f"{record['seconds']:.0f} s, {record['bytes'] / 2**20:.0f} MiB)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
