"""Real processes: identity from /proc, liveness, the launch gate, logs, stopping a whole group, marked processes.

Nothing here asserts a duration: every wait is for a condition, with a generous deadline.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import types
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.fakes.processes import FakeProcesses
from docket.adapters.world.processes.lifecycle import GatedProcess, LaunchSpec, LogPathTaken, PsutilProcesses, free_port
from docket.domain.containment.processes import ProcessIdentity

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

PATIENCE = 30.0  # seconds: a deadline for conditions, never an expectation


def eventually(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def stat_fields(pid: int) -> list[str]:
    data = Path(f"/proc/{pid}/stat").read_text()
    return data[data.rindex(")") + 2:].split()


def group_members(pgid: int) -> list[int]:
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                members.append(pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return members


@pytest.fixture
def procs():
    return PsutilProcesses()


@pytest.fixture
def spawn(procs: PsutilProcesses, tmp_path: Path):
    """spawn(argv, **spec fields) -> a GatedProcess; every group it started is killed at the end."""
    started: list[GatedProcess] = []

    def spawn(*argv: str, env: dict[str, str] | None = None, **fields) -> GatedProcess:
        fields.setdefault("log_path", tmp_path / f"log-{len(started)}.txt")
        fields.setdefault("cwd", tmp_path)
        spec = LaunchSpec(argv=argv, env=env if env is not None else {"PATH": os.environ["PATH"]}, **fields)
        gated = procs.spawn_gated(spec)
        started.append(gated)
        return gated

    yield spawn
    for gated in started:
        procs.terminate_group(gated.identity, grace=0.1, wait=PATIENCE)
        gated.popen.wait(PATIENCE)


def finished(gated: GatedProcess) -> int:
    return gated.popen.wait(PATIENCE)


# --- identity and liveness -------------------------------------------------------------------------------------------

def test_identity_of_a_real_child(procs: PsutilProcesses):
    child = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        identity = procs.identity(child.pid)
        assert identity is not None
        assert identity.host == socket.gethostname()
        assert identity.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert (identity.pid, identity.pgid) == (child.pid, child.pid)
        assert identity.start_time == stat_fields(child.pid)[19]  # field 22 of proc(5)
        assert procs.this_host() == (identity.host, identity.boot_id)
        assert procs.liveness(identity) == "alive" and procs.group_liveness(identity) == "alive"
        assert procs.liveness(dataclasses.replace(identity, start_time=str(int(identity.start_time) + 1))) == "dead"
        assert procs.liveness(dataclasses.replace(identity, host="elsewhere")) == "unknown"
        assert procs.group_liveness(dataclasses.replace(identity, host="elsewhere")) == "unknown"
        assert procs.liveness(dataclasses.replace(identity, boot_id="another-boot")) == "dead"
        assert procs.group_liveness(dataclasses.replace(identity, boot_id="another-boot")) == "dead"
    finally:
        child.kill()
    eventually(lambda: stat_fields(child.pid)[0] == "Z", "the child became a zombie")
    assert procs.liveness(identity) == "dead"  # ended, only not yet reaped
    assert procs.group_liveness(identity) == "dead"
    child.wait()
    assert procs.liveness(identity) == "dead" and procs.group_liveness(identity) == "dead"
    assert procs.identity(child.pid) is None


def test_identity_of_a_process_whose_name_has_spaces_and_parens(procs: PsutilProcesses, tmp_path: Path):
    odd = tmp_path / "a b) (c"
    odd.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(odd), "1000"])
    try:
        identity = procs.identity(child.pid)
        assert identity is not None and identity.pgid == os.getpgid(0)
        assert identity.start_time == psutil_start_ticks(child.pid)
    finally:
        child.kill()
        child.wait()


def psutil_start_ticks(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19].decode()


# --- the gate ---------------------------------------------------------------------------------------------------------

def test_the_gate_holds_the_command_until_opened(spawn, tmp_path: Path, procs: PsutilProcesses):
    marker = tmp_path / "ran"
    gated = spawn("touch", str(marker))
    assert gated.identity == procs.identity(gated.popen.pid)
    assert gated.identity.pgid == gated.identity.pid  # its own process group
    assert os.getsid(gated.identity.pid) == gated.identity.pid  # and its own session
    eventually(lambda: stat_fields(gated.identity.pid)[0] == "S", "the gated shell waits at the gate")
    assert not marker.exists() and gated.popen.poll() is None
    assert procs.liveness(gated.identity) == "alive"
    gated.open()
    assert finished(gated) == 0 and marker.exists()
    with pytest.raises(ValueError):
        gated.open()


def test_a_launch_whose_held_process_was_killed_at_its_gate_is_released_for_its_supervision_to_record(
        tmp_path: Path, procs: PsutilProcesses):
    """The ledger already holds the process (WorkerLaunched) when its gate opens: if something killed it at the
    gate, the release hands it over all the same and its supervision records how it ended. It used to raise
    BrokenPipeError, which ended the whole `docket go` as if its stdout had been closed (exit 0, nothing said)."""
    from docket.adapters.service_layer.kernel.launcher import Launcher

    marker = tmp_path / "ran"
    launcher = Launcher(procs)
    intent = types.SimpleNamespace(intent_id="launch-killed")
    launcher.expect(intent.intent_id, LaunchSpec(argv=("touch", str(marker)), cwd=tmp_path, log_path=tmp_path / "log",
                                                 env={"PATH": os.environ["PATH"]}))
    launcher.start(intent)
    held = launcher.observe(intent)
    assert held.state == "held" and held.identity is not None
    identity = held.identity
    os.killpg(identity.pgid, signal.SIGKILL)
    eventually(lambda: stat_fields(identity.pid)[0] == "Z", "the killed shell is gone (its gate's reader too)")
    released = launcher.release(intent.intent_id, identity)
    assert released is not None and released.popen.wait(PATIENCE) == -signal.SIGKILL and not marker.exists()


def test_a_gate_closed_unopened_never_runs_the_command(spawn, tmp_path: Path, procs: PsutilProcesses):
    marker = tmp_path / "ran"
    gated = spawn("touch", str(marker))
    gated.close_without_opening()
    assert finished(gated) == 125 and not marker.exists()
    assert procs.liveness(gated.identity) == "dead"


HELD_BY_A_DYING_LAUNCHER = textwrap.dedent("""
    import ctypes, os, signal, subprocess, sys
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come to us
    launcher = subprocess.Popen([sys.executable, "-c", '''
    import os, sys, time
    from pathlib import Path
    from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses
    spec = LaunchSpec(argv=("touch", sys.argv[1]), cwd=Path.cwd(), env={"PATH": os.environ["PATH"]},
                      log_path=Path(sys.argv[2]))
    gated = PsutilProcesses().spawn_gated(spec)
    print(gated.identity.pid, flush=True)
    time.sleep(1000)
    ''', sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, text=True)
    gated_pid = int(launcher.stdout.readline())
    os.kill(launcher.pid, signal.SIGKILL)  # the launcher dies holding the gate
    launcher.wait()
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == gated_pid:
            print(os.waitstatus_to_exitcode(status))
            break
""")


def test_if_the_launcher_dies_the_gated_process_exits_125_without_running(tmp_path: Path):
    marker = tmp_path / "ran"
    result = subprocess.run([sys.executable, "-c", HELD_BY_A_DYING_LAUNCHER, str(marker), str(tmp_path / "log")],
                            capture_output=True, text=True, timeout=PATIENCE, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "125"
    assert not marker.exists()


# --- logs, stdin, environment ----------------------------------------------------------------------------------------

def test_stdout_and_stderr_go_to_a_new_private_log(spawn, tmp_path: Path):
    log = tmp_path / "agent.log"
    gated = spawn("sh", "-c", "echo to-stdout; echo to-stderr >&2", log_path=log)
    assert stat.S_IMODE(log.lstat().st_mode) == 0o600
    gated.open()
    assert finished(gated) == 0
    assert log.read_text().splitlines() == ["to-stdout", "to-stderr"]


def test_a_log_path_that_is_taken_is_refused(spawn, tmp_path: Path):
    existing = tmp_path / "existing.log"
    existing.write_text("keep me")
    target = tmp_path / "target"
    target.write_text("keep me too")
    (tmp_path / "link.log").symlink_to(target)
    (tmp_path / "dangling.log").symlink_to(tmp_path / "nowhere")
    for name in ("existing.log", "link.log", "dangling.log"):
        with pytest.raises(LogPathTaken, match="refusing to reuse the log path"):
            spawn("true", log_path=tmp_path / name)
    assert existing.read_text() == "keep me" and target.read_text() == "keep me too"
    assert not (tmp_path / "nowhere").exists()


def test_the_command_gets_the_prompt_on_stdin_the_cwd_and_exactly_the_environment(spawn, tmp_path: Path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("do the thing\n")
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "agent.log"
    env = {"PATH": os.environ["PATH"], "DOCKET_RUN": "r1"}
    gated = spawn("sh", "-c", 'cat; pwd; echo "run=$DOCKET_RUN home=${HOME-unset}"',
                  env=env, cwd=work, stdin_path=prompt, log_path=log)
    gated.open()
    assert finished(gated) == 0
    assert log.read_text().splitlines() == ["do the thing", str(work), "run=r1 home=unset"]


def test_without_a_prompt_file_stdin_is_empty(spawn, tmp_path: Path):
    log = tmp_path / "agent.log"
    gated = spawn("sh", "-c", "cat; echo end", log_path=log)
    gated.open()
    assert finished(gated) == 0 and log.read_text() == "end\n"


def test_a_program_that_is_not_found_is_refused_before_anything_starts(spawn, tmp_path: Path):
    log = tmp_path / "agent.log"
    for program in ("docket-no-such-command", "./missing.sh", str(tmp_path / "missing")):
        with pytest.raises(FileNotFoundError, match="no executable program"):
            spawn(program, log_path=log)
    assert not log.exists()
    (tmp_path / "agent.sh").write_text("#!/bin/sh\necho relative to the cwd\n")
    (tmp_path / "agent.sh").chmod(0o700)
    gated = spawn("./agent.sh", log_path=log)
    gated.open()
    assert finished(gated) == 0 and log.read_text() == "relative to the cwd\n"


def test_a_failed_start_leaves_no_log_behind(spawn, tmp_path: Path):
    log = tmp_path / "agent.log"
    with pytest.raises(FileNotFoundError):
        spawn("true", cwd=tmp_path / "missing", log_path=log)
    assert not log.exists()


# --- stopping a group ------------------------------------------------------------------------------------------------

def test_terminate_group_kills_what_ignores_sigterm_and_its_grandchildren(spawn, procs: PsutilProcesses,
                                                                          tmp_path: Path):
    log = tmp_path / "agent.log"
    gated = spawn("sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000 & echo started; wait", log_path=log)
    gated.open()
    eventually(lambda: "started" in log.read_text(), "the agent started")
    eventually(lambda: len(group_members(gated.identity.pgid)) == 3, "the agent and its two children run")
    assert procs.terminate_group(gated.identity, grace=0.2, wait=PATIENCE) == "dead"
    assert group_members(gated.identity.pgid) == []
    assert gated.popen.poll() == -signal.SIGKILL  # reaped: no zombie kept
    assert procs.group_liveness(gated.identity) == "dead"


def test_terminate_group_stops_a_well_behaved_command_with_sigterm(spawn, procs: PsutilProcesses):
    gated = spawn("sleep", "1000")
    gated.open()
    eventually(lambda: Path(f"/proc/{gated.identity.pid}/comm").read_text().strip() == "sleep", "the agent runs")
    assert procs.terminate_group(gated.identity, grace=PATIENCE, wait=PATIENCE) == "dead"
    assert gated.popen.poll() == -signal.SIGTERM


def test_terminate_group_keeps_going_after_the_leader_exits(spawn, procs: PsutilProcesses, tmp_path: Path):
    log = tmp_path / "agent.log"
    gated = spawn("sh", "-c", "sleep 1000 & echo started", log_path=log)
    gated.open()
    assert finished(gated) == 0  # the leader is gone, its child still runs in the group
    eventually(lambda: "started" in log.read_text(), "the child started")
    assert len(group_members(gated.identity.pgid)) == 1
    assert procs.group_liveness(gated.identity) == "alive"
    assert procs.terminate_group(gated.identity, grace=PATIENCE, wait=PATIENCE) == "dead"
    assert group_members(gated.identity.pgid) == []


def test_a_reused_pid_is_never_signalled(procs: PsutilProcesses):
    stranger = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        now = procs.identity(stranger.pid)
        assert now is not None
        ours_before = dataclasses.replace(now, start_time=str(int(now.start_time) - 1))  # pid reused since
        assert procs.group_liveness(ours_before) == "dead"
        assert procs.terminate_group(ours_before, grace=0.1, wait=0.1) == "dead"
        assert stranger.poll() is None and procs.liveness(now) == "alive"
    finally:
        stranger.kill()
        stranger.wait()


def test_another_hosts_group_is_never_signalled(spawn, procs: PsutilProcesses):
    gated = spawn("sleep", "1000")
    elsewhere = dataclasses.replace(gated.identity, host="elsewhere")
    assert procs.terminate_group(elsewhere, grace=0.1, wait=0.1) == "unknown"
    assert procs.liveness(gated.identity) == "alive"


# --- marked processes, ports ----------------------------------------------------------------------------------------

def test_find_marked_finds_the_processes_carrying_a_mark(spawn, procs: PsutilProcesses):
    mark = f"w-{uuid.uuid4().hex}"
    env = {"PATH": os.environ["PATH"], "DOCKET_WORKER": mark, "DOCKET_RUN": "r1", "OTHER": "x"}
    gated = spawn("sleep", "1000", env=env)
    gated.open()
    assert procs.find_marked("DOCKET_WORKER", mark) == [(gated.identity, {"DOCKET_WORKER": mark, "DOCKET_RUN": "r1"})]
    assert procs.find_marked("DOCKET_WORKER", "w-nobody") == []
    procs.terminate_group(gated.identity, grace=PATIENCE, wait=PATIENCE)
    assert procs.find_marked("DOCKET_WORKER", mark) == []


def test_free_ports_differ_while_the_first_is_held():
    first = free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", first))
        held.listen()
        second = free_port()
    assert first != second and 0 < first < 65536 and 0 < second < 65536


# --- the fake keeps the same promises --------------------------------------------------------------------------------

@pytest.fixture(params=["real", "fake"])
def port(request, procs: PsutilProcesses):
    return procs if request.param == "real" else FakeProcesses()


def test_contract_held_gated_process_liveness(port, tmp_path: Path):
    spec = LaunchSpec(argv=("sleep", "1000"), cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                      log_path=tmp_path / "log")
    gated = port.spawn_gated(spec)
    identity: ProcessIdentity = gated.identity
    host, boot_id = port.this_host()
    assert (identity.host, identity.boot_id, identity.pgid) == (host, boot_id, identity.pid)
    assert port.identity(identity.pid) == identity
    assert port.liveness(identity) == "alive" and port.group_liveness(identity) == "alive"
    reused = dataclasses.replace(identity, start_time=identity.start_time + "0")
    assert port.liveness(reused) == "dead" and port.group_liveness(reused) == "dead"
    assert port.liveness(dataclasses.replace(identity, host="elsewhere")) == "unknown"
    assert port.liveness(dataclasses.replace(identity, boot_id="another")) == "dead"
    with pytest.raises(LogPathTaken):
        port.spawn_gated(spec)
    gated.close_without_opening()
    assert gated.popen.wait(PATIENCE) == 125
    assert port.liveness(identity) == "dead" and port.group_liveness(identity) == "dead"
    assert port.terminate_group(identity, grace=0.1, wait=0.1) == "dead"


def test_contract_terminate_group(port, tmp_path: Path):
    mark = f"w-{uuid.uuid4().hex}"
    spec = LaunchSpec(argv=("sleep", "1000"), cwd=tmp_path, env={"PATH": os.environ["PATH"], "DOCKET_WORKER": mark},
                      log_path=tmp_path / "log")
    gated = port.spawn_gated(spec)
    gated.open()
    assert [found for found, _ in port.find_marked("DOCKET_WORKER", mark)] == [gated.identity]
    assert port.terminate_group(gated.identity, grace=PATIENCE, wait=PATIENCE) == "dead"
    assert port.liveness(gated.identity) == "dead" and port.find_marked("DOCKET_WORKER", mark) == []
    assert gated.popen.wait(PATIENCE) == -signal.SIGTERM
