"""Egress by host: an agent whose network lists hosts reaches them through docket's egress proxy and nothing else.

Real sockets, real processes. The target server runs on an address of this machine that is neither loopback nor
private (the proxy never reaches those, and no test switch says otherwise), so the agent's allowed host is reached
honestly; a host not listed is refused by the proxy, 169.254.169.254 is refused even when listed, a name an
(injected) DNS answer points at the metadata address is refused, and a direct connection around the proxy fails at
the kernel (Landlock). Every refusal is recorded (EgressRefused) and shown in the run's summary and status."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from docket.adapters.world.processes.egress_proxy import EgressProxy
from docket.adapters.world.processes.landlock import abi_version
from docket.adapters.world.processes.private_mounts import network_available
from docket.domain.containment.egress import refused_address
from tests.conftest import git
from tests.e2e.go_world import make_go_world

pytestmark = pytest.mark.skipif(abi_version() < 4, reason="this kernel has no Landlock network rules (ABI 4)")

AGENT = r'''
import errno, os, socket, sys
target_host, target_port, udp_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
open("honest.py", "w").write("print('honest')\n")
proxy = os.environ.get("HTTPS_PROXY", "")
print(f"proxy: {proxy}", flush=True)
address = proxy.rsplit("/", 1)[-1]
proxy_host, proxy_port = address.rsplit(":", 1)

def through_proxy(host, port):
    with socket.create_connection((proxy_host, int(proxy_port)), timeout=10) as s:
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        status = head.split(b"\r\n", 1)[0].decode()
        if " 200 " not in status:
            return status
        s.sendall(b"ping\n")
        return status + " / " + s.recv(100).decode().strip()

def attempt(what, action):
    try:
        print(f"{what}: {action()}", flush=True)
    except OSError as error:
        print(f"{what}: denied ({type(error).__name__})", flush=True)
        print(f"{what} errno: {errno.errorcode.get(error.errno or 0, error.errno)}", flush=True)

def send_udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"exfiltrated", (target_host, udp_port))
    return "SENT"

attempt("allowed", lambda: through_proxy(target_host, target_port))
attempt("not listed", lambda: through_proxy("example.com", 443))
attempt("metadata", lambda: through_proxy("169.254.169.254", 80))
attempt("metadata again", lambda: through_proxy("169.254.169.254", 80))
attempt("direct", lambda: socket.create_connection((target_host, target_port), timeout=5).close() or "CONNECTED")
attempt("direct on the proxy's port",
        lambda: socket.create_connection((target_host, int(proxy_port)), timeout=5).close() or "CONNECTED")
attempt("udp", send_udp)
'''

TASKS = '''\
[[tasks]]
id = "reach"
title = "reach out"
prompt = "its work"
'''


def _public_address() -> str | None:
    """An IPv4 address of this machine the proxy may reach (not loopback, private or reserved), if it has one."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            address = fields[fields.index("inet") + 1].split("/")[0]
            if refused_address(address) is None:
                return address
    return None


class _Echo:
    """A TCP server answering each line with "pong", on the given address."""

    def __init__(self, address: str):
        self.sock = socket.create_server((address, 0))
        self.port = self.sock.getsockname()[1]
        self.served = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                try:
                    if conn.recv(100):
                        self.served += 1
                        conn.sendall(b"pong\n")
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_an_agent_reaches_its_listed_host_only_through_the_proxy_and_every_refusal_is_recorded(tmp_path: Path):
    address = _public_address()
    if address is None:
        pytest.skip("this machine has no address outside loopback and the private ranges to serve a target on")
    server = _Echo(address)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((address, 0))
    udp.setblocking(False)
    try:
        agent = tmp_path / "reach.py"
        agent.write_text(AGENT)
        world = make_go_world(tmp_path, tasks=TASKS)
        config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "reach"', 1)
        (world.repo / "docket.toml").write_text(config + f'''
[agents.reach]
command = ["{sys.executable}", "{agent}", "{address}", "{server.port}", "{udp.getsockname()[1]}"]
prompt = "stdin"
idle_timeout = "2m"
network = ["{address}:{server.port}", "169.254.169.254:80"]
''')
        git(world.repo, "commit", "-q", "-am", "the reaching agent")

        done = world.go("egress")
        try:
            received: bytes | None = udp.recv(100)
        except BlockingIOError:
            received = None
    finally:
        server.close()
        udp.close()

    assert done.returncode == 0, done.stderr
    log = "".join(p.read_text() for p in (world.repo / ".git" / "docket" / "logs").rglob("*.log"))
    assert "proxy: http://127.0.0.1:" in log, log
    assert "allowed: HTTP/1.1 200 Connection established / pong" in log, log  # reached, through the proxy
    assert "not listed: HTTP/1.1 403 Forbidden" in log, log
    assert "metadata: HTTP/1.1 403 Forbidden" in log, log  # listed by address, refused all the same
    assert "direct: denied (PermissionError)" in log, log  # Landlock: only the proxy's port
    if network_available():  # the launch's own network: loopback alone, no route to anything else
        assert "direct on the proxy's port errno: ENETUNREACH" in log, log
        assert "udp errno: ENETUNREACH" in log, log
        assert received is None
    assert server.served == 1
    launched = world.events("WorkerLaunchRequested")
    assert launched[0]["payload"]["sandbox"]["network"] == sorted([f"{address}:{server.port}",
                                                                   "169.254.169.254:80"])
    refused = world.events("EgressRefused")
    assert len(refused) == 1, refused
    payload = refused[0]["payload"]
    assert payload["total"] == 3
    assert payload["refused"] == [{"host": "169.254.169.254", "port": 80, "count": 2},
                                  {"host": "example.com", "port": 443, "count": 1}]
    summary = json.loads(done.stdout)["egress_refused"]
    assert summary == [{"worker": refused[0]["payload"]["worker_id"], "generation": 1, "total": 3,
                        "refused": payload["refused"]}]
    status = world.run("status", "egress")
    assert "egress refused: 3 connection(s), to 169.254.169.254:80 (2), example.com:443 (1)" in status.stdout, \
        status.stdout


def _connect(port: int, target: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        return s.recv(4096).split(b"\r\n", 1)[0].decode()


def test_a_listed_name_that_resolves_to_the_metadata_address_or_loopback_is_refused():
    answers = {"api.example.com": ["169.254.169.254"], "rebound.example.com": ["93.184.215.14", "127.0.0.1"]}
    proxy = EgressProxy(["api.example.com", "rebound.example.com"], resolve=lambda host, port: answers[host])
    try:
        assert _connect(proxy.port, "api.example.com:443") == "HTTP/1.1 403 Forbidden"
        assert _connect(proxy.port, "rebound.example.com:443") == "HTTP/1.1 403 Forbidden"  # one bad answer: none
        assert _connect(proxy.port, "api.example.com:22") == "HTTP/1.1 403 Forbidden"  # port 443 only
    finally:
        tally = proxy.close()
    assert tally.entries() == [("api.example.com", 22, 1), ("api.example.com", 443, 1),
                               ("rebound.example.com", 443, 1)]
    assert json.dumps(tally.total) == "3"
