"""A throwaway PostgreSQL cluster in a directory of its own, for the tests and CI (stdlib only).

    python tests/postgres_cluster.py start DIR      # prints postgresql://postgres@127.0.0.1:PORT/postgres
    python tests/postgres_cluster.py stop DIR       # stops it (fast) and removes DIR
    python tests/postgres_cluster.py available      # exit 0, or 1 printing why not

The cluster: initdb in DIR/data (trust auth, UTF8, locale C), listening on 127.0.0.1 only on a free port, its unix
socket in DIR, fsync and synchronous commit on (a ledger's durability is what the tests exercise), its log in
DIR/postgres.log. Starting a directory that already holds a running cluster prints its URL; one that holds a stopped
cluster starts it again on the port it had.

PostgreSQL refuses to run as root. As root, DIR is given to the `postgres` user and initdb / pg_ctl run as that user
through subprocess's own `user=` / `group=` / `extra_groups=` (the interpreter drops to the user in the forked child
before exec): no external tool (runuser and setpriv are util-linux, Linux only), no shell quoting, and no
`preexec_fn`, which is unsafe in a process with threads (pytest-xdist's workers have them). As anyone else, they run
as that user.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ClusterError", "available", "start", "stop"]

DISTRIBUTION_BINDIRS = "/usr/lib/postgresql/*/bin"  # Debian and Ubuntu keep each major version's server here
RUN_AS_ROOT = "postgres"  # the user the distributions' packages create
SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
DATA = "data"
LOG = "postgres.log"
MARK = "docket-test-cluster"  # what tells stop() that a directory is one of ours, safe to remove
SETTINGS = "docket-test-cluster.conf"  # included from postgresql.conf
SOCKET_PATH_MAX = 107  # sun_path, less its terminating NUL
START_SECONDS = 60
BIND_ATTEMPTS = 5


class ClusterError(Exception):
    """The cluster could not be started or stopped; the message says why (with the server's own words)."""


@dataclass(frozen=True)
class _Runner:
    """Whom the server's programs run as: this process's user, or (as root) the postgres user."""

    uid: int | None = None
    gid: int | None = None
    home: str | None = None

    def run(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # PGDATA, PGPORT... are not ours
        switch: dict[str, object] = {}
        if self.uid is not None:
            env["HOME"] = self.home or str(cwd)
            switch = {"user": self.uid, "group": self.gid, "extra_groups": []}
        return subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False, **switch)


def _bindir() -> Path | None:
    """Where initdb, pg_ctl and postgres are: pg_config --bindir, else the newest distribution directory, else
    PATH. One directory for all three: pg_ctl starts the postgres beside its own (symlink-resolved) path."""

    def complete(folder: Path) -> bool:
        return all(os.access(folder / name, os.X_OK) for name in SERVER_PROGRAMS)

    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            said = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            said = None
        if said and said.returncode == 0 and said.stdout.strip():
            candidates.append(Path(said.stdout.strip()))  # a client-only install may name a folder without a server

    def version(folder: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", Path(folder).parent.name))

    candidates += [Path(found) for found in sorted(glob.glob(DISTRIBUTION_BINDIRS), key=version, reverse=True)]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    return next((folder for folder in candidates if complete(folder)), None)


def _runner() -> _Runner | str:
    """Whom to run the server as, or why there is no one."""
    if os.geteuid() != 0:
        return _Runner()
    import pwd

    try:
        user = pwd.getpwnam(RUN_AS_ROOT)
    except KeyError:
        return f"no {RUN_AS_ROOT} user to run as root (PostgreSQL refuses to run as root)"
    if user.pw_uid == 0:
        return f"the {RUN_AS_ROOT} user is root (PostgreSQL refuses to run as root)"
    return _Runner(user.pw_uid, user.pw_gid, user.pw_dir)


def available() -> str | None:
    """None when a cluster can be started here, else why not."""
    if _bindir() is None:
        return "no PostgreSQL binaries found (pg_config --bindir, " + DISTRIBUTION_BINDIRS + ", PATH)"
    runner = _runner()
    return runner if isinstance(runner, str) else None


def _setup() -> tuple[Path, _Runner]:
    bindir, runner = _bindir(), _runner()
    if bindir is None or isinstance(runner, str):
        raise ClusterError(available() or "PostgreSQL is not available")
    return bindir, runner


def _url(port: int) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _conf_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _write_settings(folder: Path, port: int) -> None:
    (folder / DATA / SETTINGS).write_text(
        "# written by tests/postgres_cluster.py\n"
        "listen_addresses = '127.0.0.1'\n"
        f"port = {port}\n"
        f"unix_socket_directories = {_conf_string(str(folder))}\n"
        "fsync = on\n"
        "synchronous_commit = on\n"
        "full_page_writes = on\n"
        "max_connections = 200\n"  # several dockets, their pools and the tests' own connections at once
    )


def _configured_port(folder: Path) -> int | None:
    try:
        text = (folder / DATA / SETTINGS).read_text()
    except FileNotFoundError:
        return None
    found = re.search(r"^port = (\d+)$", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _running_port(bindir: Path, runner: _Runner, folder: Path) -> int | None:
    """The port of the cluster running from folder, or None when none runs."""
    data = folder / DATA
    if not (data / "PG_VERSION").exists():
        return None
    if runner.run([str(bindir / "pg_ctl"), "status", "-D", str(data)], cwd=folder).returncode != 0:
        return None
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    # postmaster.pid: pid, data directory, start time, port, socket directory, listen address, shared memory, status
    return int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None


def _check_reachable(folder: Path, runner: _Runner) -> None:
    """The server's user must be able to reach folder: every parent searchable by it (pytest's own temp folders
    are 0700 and root's, so a cluster for root's tests belongs in the system temp folder)."""
    if runner.uid is None:
        return
    import grp
    import pwd

    name = pwd.getpwuid(runner.uid).pw_name
    groups = {runner.gid} | {g.gr_gid for g in grp.getgrall() if name in g.gr_mem}
    for parent in folder.parents:
        mode = parent.stat()
        if mode.st_uid == runner.uid:
            allowed = mode.st_mode & stat.S_IXUSR
        elif mode.st_gid in groups:
            allowed = mode.st_mode & stat.S_IXGRP
        else:
            allowed = mode.st_mode & stat.S_IXOTH
        if not allowed:
            raise ClusterError(f"the {name} user cannot reach {folder}: {parent} is not searchable by it")


def _initialise(bindir: Path, runner: _Runner, folder: Path) -> None:
    if runner.uid is not None:
        os.chown(folder, runner.uid, runner.gid)
    folder.chmod(0o700)
    (folder / MARK).write_text("a throwaway PostgreSQL cluster: `python tests/postgres_cluster.py stop DIR`\n")
    made = runner.run([str(bindir / "initdb"), "-D", str(folder / DATA), "--auth=trust", "--username=postgres",
                       "--encoding=UTF8", "--locale=C"], cwd=folder)
    if made.returncode != 0:
        raise ClusterError(f"initdb failed in {folder}: {made.stderr.strip() or made.stdout.strip()}")
    with open(folder / DATA / "postgresql.conf", "a") as conf:
        conf.write(f"\ninclude = {_conf_string(SETTINGS)}\n")


def _launch(bindir: Path, runner: _Runner, folder: Path) -> subprocess.CompletedProcess[str]:
    return runner.run([str(bindir / "pg_ctl"), "start", "-w", "-t", str(START_SECONDS), "-D", str(folder / DATA),
                       "-l", str(folder / LOG)], cwd=folder)


def _log_tail(folder: Path, lines: int = 8) -> str:
    try:
        return "\n".join((folder / LOG).read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def start(folder: str | os.PathLike[str]) -> str:
    """Start a cluster in folder (made, or empty, or one this module made there) and return its URL."""
    folder = Path(folder).absolute()
    if len(os.fsencode(folder / ".s.PGSQL.65535")) > SOCKET_PATH_MAX:
        raise ClusterError(f"{folder} is too long a path for the server's unix socket (at most "
                           f"{SOCKET_PATH_MAX - len('/.s.PGSQL.65535')} bytes)")
    folder.mkdir(parents=True, exist_ok=True)
    ours = (folder / MARK).exists()
    if not ours and any(folder.iterdir()):
        raise ClusterError(f"{folder} is not empty and holds no cluster made by this script")
    bindir, runner = _setup()
    _check_reachable(folder, runner)
    running = _running_port(bindir, runner, folder)
    if running is not None:
        return _url(running)
    if not (folder / DATA / "PG_VERSION").exists():
        if ours:  # an initdb cut short: start again from nothing
            shutil.rmtree(folder / DATA, ignore_errors=True)
        _initialise(bindir, runner, folder)
        fresh = True
    else:
        fresh = False
    # A fresh cluster takes a free port, and another if that one is taken between the probe and the server's
    # bind (another test's cluster starting at the same moment). A stopped one comes back on its own port: its
    # URL is what its users hold.
    port = _configured_port(folder) if not fresh else None
    for _ in range(BIND_ATTEMPTS if fresh else 1):
        if fresh or port is None:
            port = _free_port()
            _write_settings(folder, port)
        launched = _launch(bindir, runner, folder)
        if launched.returncode == 0:
            return _url(port)
        tail = _log_tail(folder)
        if "could not bind" not in tail and "could not create any TCP/IP sockets" not in tail:
            break
    raise ClusterError(f"the server in {folder} did not start: {launched.stderr.strip()}\n{tail}".strip())


def stop(folder: str | os.PathLike[str], *, keep: bool = False) -> None:
    """Stop the cluster in folder (fast: open sessions are ended) and remove folder, unless keep (then `start`
    brings it back on the same port). A missing folder is already stopped; a folder this module did not make is
    refused, never removed."""
    folder = Path(folder).absolute()
    if not folder.exists():
        return
    if not (folder / MARK).exists():
        if any(folder.iterdir()):
            raise ClusterError(f"{folder} holds no cluster made by this script: not removed")
        if not keep:
            folder.rmdir()
        return
    if (folder / DATA / "postmaster.pid").exists():
        bindir, runner = _setup()
        stopped = runner.run([str(bindir / "pg_ctl"), "stop", "-m", "fast", "-w", "-t", str(START_SECONDS),
                              "-D", str(folder / DATA)], cwd=folder)
        if stopped.returncode != 0 and _running_port(bindir, runner, folder) is not None:
            raise ClusterError(f"the server in {folder} did not stop: {stopped.stderr.strip()}")
    if not keep:
        shutil.rmtree(folder)


def main(argv: list[str]) -> int:
    usage = "usage: postgres_cluster.py start DIR | stop DIR [--keep] | available"
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if command == "available" and not rest:
            why = available()
            print(why or "PostgreSQL is available")
            return 1 if why else 0
        if command == "start" and len(rest) == 1:
            print(start(rest[0]))
            return 0
        if command == "stop" and rest and rest[1:] in ([], ["--keep"]):
            stop(rest[0], keep=rest[1:] == ["--keep"])
            return 0
    except ClusterError as failed:
        print(f"postgres_cluster: {failed}", file=sys.stderr)
        return 1
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
