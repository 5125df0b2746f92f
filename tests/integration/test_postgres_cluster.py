"""The throwaway PostgreSQL cluster (tests/postgres_cluster.py) and the fixtures over it: real servers, real
pytest sessions in child processes, nothing mocked."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests import postgres_cluster

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL: psycopg is not installed (the postgres extra)")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "postgres_cluster.py"
URL = re.compile(r"postgresql://postgres@127\.0\.0\.1:(\d+)/postgres")


def user_tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_schema || '.' || table_name FROM information_schema.tables"
                            " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')").fetchall()
    return [row[0] for row in rows]


def databases(server_url: str) -> set[str]:
    with psycopg.connect(server_url) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()}


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def cluster_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180)


@pytest.fixture
def cluster_folder() -> Iterator[Path]:
    """A folder for a cluster of the test's own, in the system temp folder (reachable by the postgres user when
    the tests run as root), stopped and removed whatever the test did."""
    if why := postgres_cluster.available():
        pytest.skip(f"PostgreSQL: {why}")
    folder = Path(tempfile.mkdtemp(prefix="docket-pg-test-"))
    try:
        yield folder
    finally:
        postgres_cluster.stop(folder)


def run_pytest(folder: Path, tests: str, *args: str, env: dict[str, str], conftest: str = "") -> str:
    """A pytest session in a child process over tests, with the repository's postgres fixtures; its output."""
    (folder / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: not the repository's addopts or testpaths
    (folder / "conftest.py").write_text("from tests.conftest import postgres_server_url, postgres_url  # noqa\n"
                                        + conftest)
    (folder / "test_inner.py").write_text(tests)
    env = {**env, "PYTHONPATH": str(ROOT)}
    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args, str(folder)],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


def test_a_test_gets_a_fresh_empty_database_of_its_own(postgres_url: str, postgres_server_url: str) -> None:
    assert urlsplit(postgres_url).path != urlsplit(postgres_server_url).path
    assert user_tables(postgres_url) == []
    with psycopg.connect(postgres_url) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute("CREATE TABLE mine (n integer)")
        conn.execute("INSERT INTO mine VALUES (1)")
    assert name in databases(postgres_server_url)
    assert user_tables(postgres_url) == ["public.mine"]
    assert user_tables(postgres_server_url) == []  # the server's own database is not where it went


INNER_TESTS = '''
import os
import pathlib

import psycopg
import pytest

LEFT_OPEN = []


@pytest.mark.parametrize("n", range(4))
def test_alone(postgres_url, n):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM information_schema.tables"
                            " WHERE table_schema = 'public'").fetchone()[0] == 0
        conn.execute("CREATE TABLE t (n integer)")  # the same name in every test: one database would refuse it
        conn.execute("INSERT INTO t VALUES (%s)", (n,))
        assert conn.execute("SELECT n FROM t").fetchall() == [(n,)]
    pathlib.Path(os.environ["RECORD"], name).write_text(str(n))
    left_open = psycopg.connect(postgres_url)  # a test that leaves a session open must not break the drop
    left_open.execute("SELECT 1")
    LEFT_OPEN.append(left_open)
'''


def test_tests_under_two_workers_get_databases_apart_and_dropped(tmp_path: Path, postgres_server_url: str) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    record = tmp_path / "record"
    record.mkdir()
    env = {**os.environ, "DOCKET_TEST_POSTGRES_URL": postgres_server_url, "RECORD": str(record)}
    (tmp_path / "inner").mkdir()
    out = run_pytest(tmp_path / "inner", INNER_TESTS, "-n", "2", env=env)
    assert "4 passed" in out
    made = {path.name for path in record.iterdir()}
    assert len(made) == 4
    assert made.isdisjoint(databases(postgres_server_url))  # each dropped at its test's end, open sessions and all


SESSION_TEST = '''
import os
import pathlib

import psycopg


def test_where(postgres_server_url):
    with psycopg.connect(postgres_server_url) as conn:
        data = conn.execute("SHOW data_directory").fetchone()[0]
    pathlib.Path(os.environ["RECORD"]).write_text(postgres_server_url + "\\n" + data)
'''


def test_a_session_without_a_given_server_starts_its_own_and_stops_it(tmp_path: Path) -> None:
    if why := postgres_cluster.available():
        pytest.skip(f"PostgreSQL: {why}")
    record = tmp_path / "record"
    env = {k: v for k, v in os.environ.items() if k != "DOCKET_TEST_POSTGRES_URL"} | {"RECORD": str(record)}
    (tmp_path / "inner").mkdir()
    out = run_pytest(tmp_path / "inner", SESSION_TEST, env=env)
    assert "1 passed" in out
    url, data = record.read_text().splitlines()
    port = int(URL.fullmatch(url).group(1))
    assert refuses(port)
    assert not Path(data).exists() and not Path(data).parent.exists()


def test_without_postgresql_the_tests_are_skipped_saying_why(tmp_path: Path) -> None:
    empty = tmp_path / "bin"  # a PATH with no pg_config and no pg_ctl
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DOCKET_TEST_POSTGRES_URL"} | {"PATH": str(empty)}
    hide = ("import tests.postgres_cluster\n"
            "tests.postgres_cluster.DISTRIBUTION_BINDIRS = '/nonexistent/postgresql/*/bin'\n")
    (tmp_path / "inner").mkdir()
    out = run_pytest(tmp_path / "inner", "def test_needs(postgres_url):\n    raise AssertionError\n", env=env,
                     conftest=hide)
    assert "1 skipped" in out
    assert "PostgreSQL: no PostgreSQL binaries found" in out


def test_available_says_why_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = postgres_cluster.available()
    assert here is None or here.strip()
    server = postgres_cluster._bindir()  # the real server's folder, where this machine has one

    monkeypatch.setattr(postgres_cluster, "DISTRIBUTION_BINDIRS", str(tmp_path / "none" / "*" / "bin"))
    client_only = tmp_path / "client"  # pg_config of a client-only install names a folder without the server
    client_only.mkdir()
    (client_only / "pg_config").write_text(f"#!/bin/sh\necho {tmp_path / 'server-bin'}\n")
    (client_only / "pg_config").chmod(0o755)
    monkeypatch.setenv("PATH", str(client_only))
    assert postgres_cluster.available().startswith("no PostgreSQL binaries found")

    if here is not None:
        return
    (client_only / "pg_config").write_text(f"#!/bin/sh\necho {server}\n")  # now it names the server's
    assert postgres_cluster.available() is None
    if os.geteuid() == 0:
        monkeypatch.setattr(postgres_cluster, "RUN_AS_ROOT", "docket-no-such-user")
        assert postgres_cluster.available() == \
            "no docket-no-such-user user to run as root (PostgreSQL refuses to run as root)"


def test_start_twice_gives_one_server_and_stop_removes_it(cluster_folder: Path) -> None:
    started = cluster_cli("start", str(cluster_folder))
    assert started.returncode == 0, started.stderr
    assert started.stdout.count("\n") == 1
    url = started.stdout.strip()
    port = int(URL.fullmatch(url).group(1))
    again = cluster_cli("start", str(cluster_folder))
    assert (again.returncode, again.stdout.strip()) == (0, url)
    assert postgres_cluster.start(cluster_folder) == url

    with psycopg.connect(url) as conn:
        settings = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in
                    ("fsync", "synchronous_commit", "listen_addresses", "unix_socket_directories",
                     "server_encoding", "lc_collate", "lc_ctype")}
        owner = conn.execute("SELECT current_user").fetchone()[0]
    assert settings == {"fsync": "on", "synchronous_commit": "on", "listen_addresses": "127.0.0.1",
                        "unix_socket_directories": str(cluster_folder), "server_encoding": "UTF8",
                        "lc_collate": "C", "lc_ctype": "C"}
    assert owner == "postgres"
    with psycopg.connect(host=str(cluster_folder), port=port, user="postgres", dbname="postgres") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the unix socket, in the folder
    if os.geteuid() == 0:  # the server runs as the postgres user, never as root
        import pwd

        assert (cluster_folder / "data").stat().st_uid == pwd.getpwnam("postgres").pw_uid

    stopped = cluster_cli("stop", str(cluster_folder))
    assert (stopped.returncode, stopped.stdout, stopped.stderr) == (0, "", "")
    assert not cluster_folder.exists()
    assert refuses(port)


def test_a_kept_cluster_comes_back_on_its_port_with_its_data(cluster_folder: Path) -> None:
    url = postgres_cluster.start(cluster_folder)
    port = int(URL.fullmatch(url).group(1))
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE kept (n integer)")
        conn.execute("INSERT INTO kept VALUES (7)")

    postgres_cluster.stop(cluster_folder, keep=True)
    assert refuses(port)
    assert (cluster_folder / "data" / "PG_VERSION").exists()

    assert postgres_cluster.start(cluster_folder) == url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]


def test_a_folder_it_did_not_make_is_neither_used_nor_removed(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine\n")

    with pytest.raises(postgres_cluster.ClusterError, match="holds no cluster made by this script"):
        postgres_cluster.start(foreign)
    stopped = cluster_cli("stop", str(foreign))
    assert stopped.returncode == 1
    assert "holds no cluster made by this script: not removed" in stopped.stderr
    assert (foreign / "keep.txt").read_text() == "mine\n"
