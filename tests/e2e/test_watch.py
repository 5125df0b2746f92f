"""docket watch through the real CLI: a run's board from a ledger made by real workers and checks, as one JSON
document, as plain lines, as a table on a terminal (a pseudo-terminal here), and as event lines followed until the
run is aborted from another process. Whatever a worker prints, nothing of it reaches the output raw."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from ..conftest import Docket

pytestmark = pytest.mark.slow

WAIT_SECONDS = 60
# A worker's hostile output: clear the screen, retitle the terminal, ring the bell, flip the text, forge a line.
HOSTILE = r"printf '\033[2J\033]0;pwned\007 \342\200\256evil\r\n[bold]x[/bold] fake\rstill here\n'"
RAW = ("\x1b[2J", "\x1b]0;", "\x07", "\u202e")
ESCAPED = "\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil"


def popen(docket: Docket, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "docket", *args], cwd=docket.cwd, env=docket.env, text=True,
                            **kwargs)


def wait_until(condition, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


def on_a_terminal(docket: Docket, *args: str) -> tuple[int, str]:
    """Run docket with stdout and stderr on a pseudo-terminal 120 columns wide; its exit code and all it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = popen(docket, *args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    try:
        while select.select([master], [], [], WAIT_SECONDS)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return proc.wait(timeout=WAIT_SECONDS), out.decode()


def assert_nothing_raw(text: str) -> None:
    assert not [raw for raw in RAW if raw in text], repr(text)


def _release(docket: Docket) -> Path:
    from docket.adapters.world.files.paths import task_worktree_path

    return task_worktree_path(docket.cwd / ".git", "r1", "t1") / ".git" / "test-release"


@pytest.fixture
def world(docket: Docket) -> Docket:
    (docket.cwd / "docket.toml").write_text('[checks.ok]\ncommand = ["true"]\n')
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "watch it", "--id", "r1")
    docket("task", "plan", "r1", "--title", "hostile", "--id", "t1")
    docket("task", "plan", "r1", "--title", "idle", "--id", "t2")
    return docket


def board(docket: Docket, *args: str) -> dict:
    result = docket("watch", *args, "--json")
    return result.json()


def test_the_board_follows_a_real_worker_and_its_checks_and_no_escape_reaches_the_output(world, tmp_path):
    docket = world
    release = _release(docket)  # where the sandboxed worker can see it: its own workspace's .git
    worker = popen(docket, "worker", "launch", "r1", "--task", "t1", "--", "sh", "-c",
                   f"{HOSTILE}; while [ ! -e '{release}' ]; do sleep 0.05; done; echo more >> README.md",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    follower = popen(docket, "watch", "r1", stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # piped: event lines
    try:
        log = docket.ledger.parent / "logs" / "t1" / "1.log"
        wait_until(lambda: log.exists() and b"still here" in log.read_bytes(), "the worker's output")
        doc = board(docket)  # no RUN: the most recently opened open run
        assert (doc["run_id"], doc["status"], doc["closed"]) == ("r1", "active", False)
        running, idle = doc["tasks"]
        assert (running["task_id"], running["state"], running["generation"]) == ("t1", "running", 1)
        assert running["last_line"] == "still here"  # the log's last line, exact in JSON
        assert (idle["task_id"], idle["state"], idle["generation"], idle["elapsed_ms"]) == ("t2", "not started", None, None)

        plain = docket("watch", "r1", "--once")
        assert plain.stdout.splitlines()[0].startswith("run r1: running, budget ")
        assert " running " in plain.stdout.splitlines()[1] and plain.stdout.splitlines()[1].endswith(": still here")

        release.touch()
        assert worker.wait(timeout=WAIT_SECONDS) == 0
        (log.parent / "1.log").write_bytes(b"")  # from here on the line shown is the one the ledger recorded
        doc = board(docket, "r1")
        exited = doc["tasks"][0]
        assert (exited["state"], exited["last_line"], exited["checks"]) == ("exited", "still here", None)
        binding = docket("status", "r1", "--json").json()["tasks"][0]["candidate"]["binding_id"]
        assert exited["candidate"] == binding[:12]
        docket("check", "run", binding, "--check", "ok")
        assert board(docket, "r1")["tasks"][0]["checks"] == "1/1 passed"

        docket("run", "abort", "r1", "--reason", "enough")
        out, err = follower.communicate(timeout=WAIT_SECONDS)  # the run closed: watch ends by itself
        assert follower.returncode == 0, err
    finally:
        for proc in (worker, follower):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    lines = out.splitlines()
    types = [line.split()[2] for line in lines]
    assert types[0] == "RunOpened" and types[-1] == "RunAborted"
    for expected in ("TaskPlanned", "WorkerLaunched", "WorkerExited", "CandidatePinned", "CheckPassed"):
        assert expected in types
    positions = [int(line.split()[0]) for line in lines]
    assert positions == sorted(set(positions))  # each event once, in ledger order
    assert "cause=exited exit_code=0" in lines[types.index("WorkerExited")]
    assert lines[-1].endswith("reason=enough")
    assert_nothing_raw(out + err)

    # The run is closed: watch draws it once and exits 0, whichever way it draws.
    final = board(docket, "r1")
    assert (final["status"], final["closed"], [t["state"] for t in final["tasks"]]) == \
        ("aborted", True, ["stopped", "stopped"])
    piped = docket("watch", "r1")
    assert piped.stdout.splitlines()[-1].split()[2] == "RunAborted"
    code, shown = on_a_terminal(docket, "watch", "r1")
    assert code == 0 and "stopped" in shown and "still here" in shown
    assert_nothing_raw(shown)


def test_on_a_terminal_the_table_escapes_what_a_worker_printed(world, tmp_path):
    docket = world
    docket("worker", "launch", "r1", "--task", "t1", "--", "sh", "-c", r"printf 'a\nz \033[2J\033]0;pwned\007 "
           r"\342\200\256evil [bold]x[/bold]\n'")
    (docket.ledger.parent / "logs" / "t1" / "1.log").unlink()  # the line shown is the one the ledger recorded
    code, once = on_a_terminal(docket, "watch", "r1", "--once")
    assert code == 0
    assert ESCAPED in once and "[bold]x[/bold]" in once, once  # shown as text, markup not interpreted
    assert_nothing_raw(once)
    plain = docket("watch", "r1", "--once").stdout
    assert ESCAPED in plain and "exited" in plain
    assert_nothing_raw(plain)
    assert board(docket, "r1")["tasks"][0]["last_line"] == "z \x1b[2J\x1b]0;pwned\x07 \u202eevil [bold]x[/bold]"


def test_a_log_replaced_by_a_symlink_is_not_followed(world, tmp_path):
    docket = world
    secret = tmp_path / "secret"
    secret.write_text("the secret line\n")
    release = _release(docket)  # where the sandboxed worker can see it: its own workspace's .git
    worker = popen(docket, "worker", "launch", "r1", "--task", "t1", "--", "sh", "-c",
                   f"echo started; while [ ! -e '{release}' ]; do sleep 0.05; done",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = docket.ledger.parent / "logs" / "t1" / "1.log"
        wait_until(lambda: log.exists() and b"started" in log.read_bytes(), "the worker's output")
        wait_until(lambda: board(docket, "r1")["tasks"][0]["state"] == "running", "the worker running")
        log.unlink()
        log.symlink_to(secret)
        assert board(docket, "r1")["tasks"][0]["last_line"] is None
    finally:
        release.touch()
        worker.wait(timeout=WAIT_SECONDS)


def test_no_open_run_and_an_unknown_run_are_not_found(docket):
    docket("init")
    for args, code in ((("watch",), "no-run"), (("watch", "--json"), "no-run"), (("watch", "nope"), "run-not-found"),
                       (("watch", "nope", "--once"), "run-not-found")):
        result = docket(*args, check=False)
        assert result.returncode == 5, result.stderr
        assert result.stderr == f"docket: error: {code}: " + result.stderr.split(": ", 3)[3]
        assert result.stderr.count("\n") == 1
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("run", "abort", "r1", "--reason", "done")
    assert docket("watch", check=False).returncode == 5  # a closed run is watched only by name
    assert docket("watch", "r1", "--json").json()["closed"] is True
