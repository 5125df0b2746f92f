"""No unix socket a sandboxed launch was not given, and no /dev/shm that outlives it: launches made as docket makes
them (``sandbox_for``'s policy, ``spawn_gated``'s preexec), run for real on this kernel, against real listening
sockets where ssh-agent, PostgreSQL and the desktop keep theirs (``/tmp``, ``/run``, ``/var/run/postgresql``,
``~/.ssh``), and a real /dev/shm."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docket.adapters.world.processes import private_mounts
from docket.adapters.world.processes.landlock import abi_version
from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses, wait_for_group
from docket.adapters.world.processes.sandbox_roots import sandbox_for
from docket.domain.containment.sandbox import Confinement

pytestmark = [pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock: the sandbox cannot be tested"),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="unix sockets in namespaces: Linux")]
needs_namespace = pytest.mark.skipif(not private_mounts.available(), reason="no private mount namespace can be "
                                     "made here (user namespaces off?): the seccomp fallback is tested instead")

# each try prints one line, "<name>: refused (<error>)" or "<name>: CONNECTED", so the test sees it was really made
CONNECT = r'''
import socket, sys
for pair in sys.argv[1:]:
    name, path = pair.split("=", 1)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
        print(f"{name}: CONNECTED", flush=True)
    except OSError as error:
        print(f"{name}: refused ({type(error).__name__})", flush=True)
'''

PLANT = r'''
import os, sys, time
tag, wait_for = sys.argv[1], sys.argv[2]
with open(f"/dev/shm/{tag}-planted", "w") as f:
    f.write("planted")
written = 0
try:
    with open(f"/dev/shm/{tag}-big", "wb") as f:
        block = b"x" * (1 << 20)
        for _ in range(100):
            f.write(block)
            f.flush()
            written += len(block)
except OSError as error:
    print(f"big stopped: {type(error).__name__}", flush=True)
print(f"planted {written >> 20} MiB; sees its file: {os.path.exists(f'/dev/shm/{tag}-planted')}", flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(wait_for) and time.monotonic() < deadline:
    time.sleep(0.05)
'''

LOOK = r'''
import os, sys
tag = sys.argv[1]
print(f"sibling sees: {sorted(n for n in os.listdir('/dev/shm') if n.startswith(tag))}", flush=True)
with open(f"/dev/shm/{tag}-mine", "w") as f:
    f.write("its own")
print("sibling wrote its own", flush=True)
'''

FALLBACK = r'''
import os, socket, sys
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    print("unix: MADE", flush=True)
except OSError as error:
    print(f"unix: refused ({type(error).__name__})", flush=True)
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
print("inet: made", flush=True)
a, b = socket.socketpair()
print("socketpair: made", flush=True)
try:
    open(sys.argv[1], "w").close()
    print("shm: WROTE", flush=True)
except OSError as error:
    print(f"shm: refused ({type(error).__name__})", flush=True)
'''


def _file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _spawn(tmp_path: Path, script: str, args: list[str]) -> tuple[PsutilProcesses, object, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    program = _file(work / f"{secrets.token_hex(4)}.py", script)
    argv = (sys.executable, str(program), *args)
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", str(tmp_path))}
    policy = sandbox_for(Confinement(), write=[work], read=[], temporary=tmp_path / f"tmp-{program.stem}",
                         argv=argv, env=env, cwd=work)
    assert policy.enforced
    processes = PsutilProcesses()
    log = tmp_path / f"{program.stem}.log"
    gated = processes.spawn_gated(LaunchSpec(argv=argv, cwd=work, env=env, log_path=log, sandbox=policy))
    gated.open()
    return processes, gated, log


def _finish(processes: PsutilProcesses, gated: object, log: Path) -> str:
    code, cause = wait_for_group(processes, gated, timeout_ms=60_000, log_path=log)
    text = log.read_text()
    assert (code, cause) == (0, None), text
    return text


def _launch(tmp_path: Path, script: str, args: list[str]) -> str:
    return _finish(*_spawn(tmp_path, script, args))


def _listen(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    return server


@pytest.fixture
def outside_home() -> Iterator[Path]:
    """A home folder outside /tmp and /run (a real user's is): made in /srv or /mnt, left to nothing else."""
    for parent in ("/srv", "/mnt", "/var/lib"):
        if os.access(parent, os.W_OK):
            home = Path(parent) / f"docket-test-home-{secrets.token_hex(4)}"
            home.mkdir(mode=0o700)
            try:
                yield home
            finally:
                shutil.rmtree(home, ignore_errors=True)
            return
    pytest.skip("no folder outside /tmp and /run is writable here to make a home in")


@needs_namespace
def test_a_sandboxed_process_connects_to_no_socket_in_tmp_run_postgresql_or_the_home_only_to_its_own(
        tmp_path, outside_home, monkeypatch):
    monkeypatch.setenv("HOME", str(outside_home))  # docket's view of the home, as a user's session has it
    made: list[Path] = []
    servers = []

    def listening(name: str, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        servers.append(_listen(path))
        made.append(path)
        return f"{name}={path}"

    tag = secrets.token_hex(4)
    pairs = [
        listening("ssh-agent-in-tmp", Path(f"/tmp/ssh-docket{tag}/agent.1")),
        listening("bus-in-run", Path(f"/run/docket-{tag}.sock")),
        listening("ssh-agent-in-home", outside_home / ".ssh" / "agent.sock"),
        listening("gpg-agent-in-home", outside_home / ".gnupg" / "S.gpg-agent"),
        listening("socket-elsewhere-in-home", outside_home / "work" / ".tool.sock"),
    ]
    postgresql = Path("/run/postgresql")
    if postgresql.is_dir() and os.access(postgresql, os.W_OK):
        pairs.append(listening("postgresql", postgresql / f".s.PGSQL.{40000 + secrets.randbelow(20000)}"))
        pairs[-1] = pairs[-1].replace("/run/postgresql", "/var/run/postgresql")  # as a client names it
    if Path("/run/postgresql/.s.PGSQL.5432").exists():
        pairs.append("real-postgresql=/var/run/postgresql/.s.PGSQL.5432")
    given = tmp_path / "work" / "given.sock"  # inside its workspace (a write root lying in /tmp): its own
    pairs.append(listening("given", given))
    try:
        text = _launch(tmp_path, CONNECT, pairs)
    finally:
        for server in servers:
            server.close()
        for path in made:
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/ssh-docket{tag}", ignore_errors=True)

    for pair in pairs:
        name = pair.split("=", 1)[0]
        if name == "given":
            assert "given: CONNECTED" in text, text  # the socket it was given: reached, through the same mounts
        else:
            assert f"{name}: refused (FileNotFoundError)" in text, text  # really tried: there is nothing there


@needs_namespace
def test_what_a_sandboxed_process_leaves_in_dev_shm_is_its_own_gone_with_it_and_unseen_by_a_sibling(tmp_path,
                                                                                                     request):
    tag = f"docket-test-{secrets.token_hex(4)}"
    request.addfinalizer(lambda: [p.unlink() for p in Path("/dev/shm").glob(f"{tag}*")])  # were it ever to leak
    go_on = tmp_path / "work" / "go-on"
    processes, gated, log = _spawn(tmp_path, PLANT, [tag, str(go_on)])
    try:
        deadline = time.monotonic() + 60
        while "planted" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        sibling = _launch(tmp_path, LOOK, [tag])  # a launch beside it, while it still runs
        host_sees = sorted(name for name in os.listdir("/dev/shm") if name.startswith(tag))
    finally:
        go_on.touch()
        text = _finish(processes, gated, log)

    assert "sees its file: True" in text, text  # it could write its /dev/shm: POSIX semaphores, multiprocessing
    written = int(text.split("planted ", 1)[1].split(" MiB", 1)[0])
    assert written <= private_mounts.SHM_SIZE >> 20, text  # 100 MiB asked for: its /dev/shm holds at most 64
    assert "big stopped: OSError" in text, text  # ENOSPC
    assert "sibling sees: []" in sibling and "sibling wrote its own" in sibling, sibling
    assert host_sees == []  # the host's /dev/shm never held any of it, even while it ran
    assert sorted(name for name in os.listdir("/dev/shm") if name.startswith(tag)) == []


def test_where_no_namespace_can_be_made_no_unix_socket_can_be_made_and_no_dev_shm_written(tmp_path, monkeypatch):
    if private_mounts.no_unix_sockets() is None:
        pytest.skip("no seccomp filter for this architecture")
    monkeypatch.setattr(private_mounts, "_available", False)  # as on a kernel without user namespaces

    probe = Path(f"/dev/shm/docket-test-fallback-{secrets.token_hex(4)}")
    try:
        text = _launch(tmp_path, FALLBACK, [str(probe)])
        written = probe.exists()
    finally:
        probe.unlink(missing_ok=True)

    assert "unix: refused (PermissionError)" in text, text
    assert "inet: made" in text and "socketpair: made" in text, text
    assert "shm: refused (PermissionError)" in text, text
    assert not written


AS_A_USER = r'''
import importlib.util, os, socket, subprocess, sys
spec = importlib.util.spec_from_file_location("private_mounts", sys.argv[1])
private_mounts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(private_mounts)
work, outside, given = sys.argv[2:5]
print(f"available {private_mounts.available()}", flush=True)
enter = private_mounts.private_mounts([work])

def confine():
    failed = enter()
    if failed:
        raise OSError(failed, "private mounts")

child = """
import os, socket, sys
for path in sys.argv[1:]:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
        print(path, "CONNECTED", flush=True)
    except OSError as error:
        print(path, "refused", type(error).__name__, flush=True)
with open("made-inside", "w") as f:
    f.write("mine")
print("ids", os.getuid(), os.getgid(), flush=True)
"""
done = subprocess.run([sys.executable, "-c", child, outside, given], preexec_fn=confine, cwd=work,
                      capture_output=True, text=True)
print(done.returncode, done.stdout, done.stderr[-2000:], flush=True)
made = os.stat(os.path.join(work, "made-inside"))
print(f"owner {made.st_uid} {made.st_gid}", flush=True)
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become an ordinary user for the test")
def test_as_an_ordinary_user_the_namespace_is_made_in_a_user_namespace_and_what_it_writes_stays_the_users():
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3 an ordinary user may run")
    nobody = 65534
    base = Path(f"/tmp/docket-test-user-{secrets.token_hex(4)}")
    work = base / "work"
    work.mkdir(parents=True)
    base.chmod(0o755)
    os.chown(work, nobody, nobody)
    outside, given = base / "outside.sock", work / "given.sock"
    servers = [_listen(outside), _listen(given)]
    for path in (outside, given):
        path.chmod(0o777)
    try:
        done = subprocess.run([python, "-c", AS_A_USER, private_mounts.__file__, str(work), str(outside), str(given)],
                              user=nobody, group=nobody, extra_groups=[], capture_output=True, text=True,
                              timeout=60, cwd="/")
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(base, ignore_errors=True)
    text = done.stdout + done.stderr
    if "available False" in text:
        pytest.skip("unprivileged user namespaces are off here: the seccomp fallback applies")
    assert done.returncode == 0, text
    assert f"{outside} refused FileNotFoundError" in text, text
    assert f"{given} CONNECTED" in text, text
    assert f"ids {nobody} {nobody}" in text, text  # its own ids, mapped to themselves: not root in its namespace
    assert f"owner {nobody} {nobody}" in text, text  # what it wrote is the user's, seen from outside


AS_A_USER_WITH_ITS_NETWORK = r'''
import importlib.util, socket, subprocess, sys, threading

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

private_mounts, private_network = load("private_mounts", sys.argv[1]), load("private_network", sys.argv[2])
work, remote_port = sys.argv[3], int(sys.argv[4])
print(f"available {private_mounts.available()}", flush=True)
port = 47123
channel = private_network.ListenerChannel(port)
enter = private_mounts.private_mounts([work], network=True)

def confine():
    failed = enter() or channel.step()
    if failed:
        raise OSError(failed, "private mounts and network")

child = """
import socket, sys
port, remote_port = int(sys.argv[1]), int(sys.argv[2])
with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
    print("proxy says", s.recv(100).decode(), flush=True)
try:
    socket.create_connection(("127.0.0.1", remote_port), timeout=5).close()
    print("outside: CONNECTED", flush=True)
except OSError as error:
    print("outside: refused", type(error).__name__, flush=True)
"""
process = subprocess.Popen([sys.executable, "-c", child, str(port), str(remote_port)], preexec_fn=confine, cwd=work,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
listener = channel.receive()
print(f"listener {listener is not None}", flush=True)
if listener is not None:
    conn, _ = listener.accept()
    conn.sendall(b"hello")
    conn.close()
out, err = process.communicate(timeout=30)
print(process.returncode, out, err[-2000:], flush=True)
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become an ordinary user for the test")
def test_as_an_ordinary_user_a_launch_gets_a_loopback_only_network_whose_listener_docket_serves():
    from docket.adapters.world.processes import private_network

    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3 an ordinary user may run")
    nobody = 65534
    base = Path(f"/tmp/docket-test-user-{secrets.token_hex(4)}")
    work = base / "work"
    work.mkdir(parents=True)
    base.chmod(0o755)
    os.chown(work, nobody, nobody)
    outside = socket.create_server(("127.0.0.1", 0))  # docket's own loopback: not the launch's
    try:
        done = subprocess.run([python, "-c", AS_A_USER_WITH_ITS_NETWORK, private_mounts.__file__,
                               private_network.__file__, str(work), str(outside.getsockname()[1])],
                              user=nobody, group=nobody, extra_groups=[], capture_output=True, text=True,
                              timeout=60, cwd="/")
    finally:
        outside.close()
        shutil.rmtree(base, ignore_errors=True)
    text = done.stdout + done.stderr
    if "available False" in text:
        pytest.skip("unprivileged user namespaces are off here: the seccomp fallback applies")
    assert done.returncode == 0, text
    assert "listener True" in text, text
    assert "proxy says hello" in text, text  # its 127.0.0.1:port is docket's listener, served outside
    assert "outside: refused ConnectionRefusedError" in text, text  # the host's loopback is not its loopback
