"""Shared builders: real git repositories in tmp_path, a fixed clock, a CLI client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

# pytest-xdist's workers set COLUMNS=80 (and pytest may set LINES): docket's children would take them over a
# pseudo-terminal's own size, so the terminal tests would see another width than the one they set.
for _inherited in ("COLUMNS", "LINES"):
    os.environ.pop(_inherited, None)

T0 = "2026-01-01T00:00:00.000Z"


# ---------------------------------------------------------------- campaigns: sampled in `make test`, whole in
# `make test-campaigns` (DOCKET_CAMPAIGNS=full). A campaign (marked `campaign`) is a test that repeats one behaviour
# over many crash points, seeds or random instants. `make test` runs each campaign's first rounds and, of its
# parametrized cases, a rotating sample: every named crash point is still reached in every run (the single-host
# crash tests name each one), and every case of the campaign itself comes round within a few runs. The rotation is
# the UTC day unless DOCKET_TEST_ROTATION sets it; the run's header prints it, so a failure reproduces with it.


_SAMPLED_OUT = ("sampled out of rotation {} (DOCKET_TEST_ROTATION): DOCKET_CAMPAIGNS=full (make test-campaigns) "
                "runs every case")


def campaigns_full() -> bool:
    """Whether the campaigns run whole (DOCKET_CAMPAIGNS=full: `make test-campaigns`)."""
    return os.environ.get("DOCKET_CAMPAIGNS") == "full"


def rotation() -> int:
    """This run's rotation: the same in every xdist worker (the controller sets it before they start)."""
    given = os.environ.get("DOCKET_TEST_ROTATION", "")
    return int(given) if given.isdigit() else int(time.time() // 86_400)


def campaign_rounds(full: int, sampled: int) -> int:
    """How many rounds a random-kill campaign runs: all of them under DOCKET_CAMPAIGNS=full, else its first few
    (the same seeded instants, so a failure in `make test` reproduces in the full campaign too)."""
    return full if campaigns_full() else min(full, sampled)


def campaign_cases(*groups: list, salt: int = 0) -> list:
    """The cases of a parametrized campaign, all of them collected: under DOCKET_CAMPAIGNS=full all run; else one
    case of each group runs, chosen by the rotation (so each group's every case runs once in len(group) runs), and
    the others are skipped saying so."""
    if campaigns_full():
        return [value for group in groups for value in group]
    turn = rotation() + salt
    reason = _SAMPLED_OUT.format(rotation())
    return [value if i == turn % len(group) else pytest.param(value, marks=pytest.mark.skip(reason=reason))
            for group in groups for i, value in enumerate(group)]


def campaign_split(values: list, part: int, parts: int = 2) -> list:
    """The cases of one of `parts` tests that each try every value a different way (say, each named crash point
    recovered by replay, or by running the command again): all of them collected; under DOCKET_CAMPAIGNS=full all
    run; else each value runs in one of the tests, which one turning with the rotation, so that every value is
    still tried in every run, and every pair of test and value within `parts` runs."""
    if campaigns_full():
        return list(values)
    reason = _SAMPLED_OUT.format(rotation())
    return [value if (rotation() + i) % parts == part else pytest.param(value, marks=pytest.mark.skip(reason=reason))
            for i, value in enumerate(values)]


def pytest_configure(config: pytest.Config) -> None:
    # Before xdist starts its workers, which inherit it: all of them sample the same cases.
    os.environ.setdefault("DOCKET_TEST_ROTATION", str(rotation()))


# The files of the longest tests (`--durations` lists them), started first: xdist hands tests out in collection
# order, so one of them started last would hold the run's end while the other workers sit idle.
LONGEST_FIRST = ("tests/e2e/test_demo_fleet.py", "tests/e2e/test_fleet.py", "tests/attacks/test_sizes_large_files.py",
                 "tests/e2e/test_real_claude.py", "tests/e2e/test_real_aider.py", "tests/e2e/test_real_codex.py",
                 "tests/e2e/test_wheel_install.py", "tests/e2e/test_candidate_crashes.py",
                 "tests/e2e/test_examples.py", "tests/e2e/test_database_outage.py", "tests/e2e/test_go_control.py",
                 "tests/e2e/test_gc_gone_repositories.py", "tests/integration/test_ledger_stores.py",
                 "tests/integration/test_postgres_cluster.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first = {path: rank for rank, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::")[0], len(first)))  # stable: the rest keep order


def pytest_report_header(config: pytest.Config) -> str:
    return (f"docket campaigns: {'full' if campaigns_full() else 'sampled'}, "
            f"DOCKET_TEST_ROTATION={os.environ.get('DOCKET_TEST_ROTATION')}")


@pytest.fixture(scope="session", autouse=True)
def session_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data folder of what runs before a test's own (module and session fixtures): never the user's."""
    folder = tmp_path_factory.mktemp("session-data")
    before = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(folder)
    yield folder / "docket"
    if before is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = before


@pytest.fixture(scope="session", autouse=True)
def trusting_user_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user's own configuration for the suite (XDG_CONFIG_HOME, never the user's ~/.config): it trusts every
    repository's docket.toml, as a CI runner of one's own repository may. The tests of the trust rule itself
    (tests/attacks/test_trust_widening.py) give docket a configuration home of their own, trusting nothing."""
    folder = tmp_path_factory.mktemp("user-config")
    (folder / "docket").mkdir()
    (folder / "docket" / "trust.toml").write_text("any_repository = true\n")
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(folder)
    yield folder / "docket"
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


@pytest.fixture(autouse=True)
def data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """docket's data folder (workspaces, executions) of each test: its own, never the user's ~/.local/share, and
    inherited by every docket the test starts."""
    folder = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("XDG_DATA_HOME", str(folder))
    return folder / "docket"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def listed_places(repo: Path) -> list[str]:
    """What git lists as worktrees of repo (its main checkout, linked worktrees), and every workspace and execution
    docket made for it (repositories of their own in the data folder, which git does not list)."""
    from docket.adapters.world.git.inventory import DulwichInventory

    listing = git(repo, "worktree", "list", "--porcelain")
    found = [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]
    return found + [w.path for w in DulwichInventory().list_docket_worktrees(repo / ".git") if w.registered]


def make_repo(path: Path) -> Path:
    """A real git repository at path (made) with one commit on main."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit on main."""
    return make_repo(tmp_path / "repo")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self):  # noqa: ANN201
        return json.loads(self.stdout)


@dataclass
class Docket:
    """Runs the real `docket` CLI as a separate process in a repository."""

    cwd: Path
    env: dict[str, str]

    def __call__(self, *args: str, fault: str | None = None, check: bool = True, now: str | None = None) -> Result:
        env = dict(self.env)
        if fault:
            env["DOCKET_FAULT"] = fault
        if now:
            env["DOCKET_NOW"] = now
            env["DOCKET_TESTING"] = "1"
        proc = subprocess.run([sys.executable, "-m", "docket", *args], cwd=self.cwd, env=env,
                              capture_output=True, text=True, timeout=120)
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0 and not fault:
            raise AssertionError(f"docket {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return result

    @property
    def ledger(self) -> Path:
        return self.cwd / ".git" / "docket" / "ledger.sqlite"


@pytest.fixture
def docket(repo: Path) -> Docket:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    return Docket(repo, env)


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Path:
    """A small real filesystem of its own (tmpfs, 16 MiB): to fill, or to remount read-only.

    Mounting needs root (as in CI); elsewhere the test is skipped, saying why.
    """
    point = tmp_path / "tmpfs"
    point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(point)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"mounting is not permitted here: {made.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)



@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """A PostgreSQL server for this session (each xdist worker is a session): DOCKET_TEST_POSTGRES_URL's (CI starts
    one for the whole run), else a throwaway cluster of the session's own, else the test is skipped saying why."""
    given = os.environ.get("DOCKET_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    from tests import postgres_cluster

    why = postgres_cluster.available()
    if why:
        pytest.skip(f"PostgreSQL: {why}")
    # The system temp folder, not pytest's: as root the server runs as the postgres user, which cannot enter
    # pytest's 0700 folders; and a short path leaves room for the unix socket's.
    folder = tempfile.mkdtemp(prefix="docket-pg-")
    try:
        yield postgres_cluster.start(folder)
    finally:
        postgres_cluster.stop(folder)


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty database of this test's own on the session's server (made from template0, so nothing a
    server's template1 holds leaks in), dropped afterwards even if the test left sessions open on it."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        pytest.skip("PostgreSQL: psycopg is not installed (the postgres extra)")
    name = f"docket_test_{uuid.uuid4().hex}"  # unique across xdist workers sharing one server
    create = sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        admin.execute(create.format(sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(postgres_server_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# The real agent CLIs (aider, Codex CLI, Claude Code), pinned and installed into a cache on first use.
from tests.agents.real_clis import aider_cli, claude_cli, codex_cli  # noqa: E402, F401
