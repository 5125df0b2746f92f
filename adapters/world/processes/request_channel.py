"""The channel a worker generation's agent reaches docket through: a Unix socket in its worker folder.

Each generation gets its own socket (``<worker folder>/docket.sock``; its path is in the agent's environment as
``DOCKET_REQUESTS``), served by the docket process that supervises the generation. The socket names the
generation: a request names only its own id and content, never a run, task, worker or generation. Whoever
connects must be the generation's agent process or one of its descendants (the kernel says who connects:
``SO_PEERCRED``), so another task's agent, which can see the path, cannot speak for this one.

One request per connection: a JSON object on one line (at most ``MAX_REQUEST`` bytes), answered by one JSON object
on one line. The agent side (``docket request``, ``docket mcp``) uses ``send``.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Protocol
import sys
import shlex
from .sandbox_roots import install_roots
from importlib.util import find_spec

__all__ = ["CHANNEL_VARIABLE", "MAX_REQUEST", "RequestChannel", "SOCKET_NAME", "descends_from", "docket_command", "docket_program",
           "docket_roots", "send", "write_mcp_config"]

CHANNEL_VARIABLE = "DOCKET_REQUESTS"
SOCKET_NAME = "docket.sock"
MAX_REQUEST = 64 * 1024
IO_TIMEOUT_SECONDS = 10.0
_UCRED = struct.Struct("3i")


@contextmanager
def _short_path(path: Path) -> Iterator[str]:
    """A path to the socket short enough for sockaddr_un (108 bytes): its folder opened, named through /proc."""
    if len(os.fsencode(str(path))) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time in clock ticks) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[1]), fields[19].decode()


def descends_from(pid: int, ancestor_pid: int, ancestor_start: str) -> bool:
    """Whether pid is the process (ancestor_pid, started at ancestor_start, in clock ticks) or descends from it."""
    seen = 0
    while pid > 1 and seen < 4096:
        stat = _stat(pid)
        if stat is None:
            return False
        if pid == ancestor_pid:
            return stat[1] == ancestor_start
        pid, seen = stat[0], seen + 1
    return False


class Requests(Protocol):
    """What a channel serves: each request's reply, from the channel's thread; stopped, from it too, at the end."""

    def handle(self, document: dict[str, Any]) -> dict[str, Any]: ...

    def replied(self, reply: dict[str, Any]) -> None: ...  # the reply was sent whole

    def stopped(self) -> None: ...


class RequestChannel:
    """Serves one generation's socket until closed: each request handed to requests, its reply sent back."""

    def __init__(self, path: Path, requests: Requests, allowed: Callable[[int], bool]) -> None:
        self.path = path
        self.requests = requests
        self._allowed = allowed
        self._closed = threading.Event()
        try:
            path.unlink()  # a socket an earlier docket left (the folder is this generation's alone)
        except FileNotFoundError:
            pass
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        with _short_path(path) as name:
            self._socket.bind(name)
        os.chmod(path, 0o600)
        self._socket.listen(16)
        self._socket.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, name=f"requests {path.parent.name}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._accept()
        finally:
            self.requests.stopped()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with connection:
                try:
                    self._answer(connection)
                except OSError:
                    pass  # the agent went away before its reply: it asks again

    def _answer(self, connection: socket.socket) -> None:
        connection.settimeout(IO_TIMEOUT_SECONDS)
        pid, uid, _ = _UCRED.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        line = _read_line(connection)  # read whole before any reply: the sender is then told, not cut off
        if uid != os.getuid() or not self._allowed(pid):
            _reply(connection, {"status": "refused", "code": "not-this-worker",
                                "message": "this channel serves one worker generation's agent and what it runs"})
            return
        if line is None:
            _reply(connection, {"status": "refused", "code": "bad-request",
                                "message": f"a request is one line of JSON, at most {MAX_REQUEST} bytes"})
            return
        try:
            document = json.loads(line)
        except ValueError:
            document = None
        if not isinstance(document, dict):
            _reply(connection, {"status": "refused", "code": "bad-request", "message": "a request is a JSON object"})
            return
        try:
            reply = self.requests.handle(document)
        except Exception as e:  # a fault of docket's (its ledger unreachable, say): the agent may ask again
            reply = {"status": "error", "code": "internal-error", "message": f"docket could not decide: {type(e).__name__}"}
        _reply(connection, reply)
        try:
            self.requests.replied(reply)
        except Exception:  # noqa: S110 (what it records is asked again at the next reply)
            pass

    def close(self) -> None:
        self._closed.set()
        self._socket.close()
        self._thread.join(timeout=5)
        try:
            self.path.unlink()
        except OSError:
            pass


def _read_line(connection: socket.socket, limit: int = MAX_REQUEST) -> bytes | None:
    """The first line the other end sends, without its newline; None when it is blank or longer than limit."""
    data = b""
    while b"\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            return None
    line = data.split(b"\n", 1)[0]
    return line if line.strip() else None


def _reply(connection: socket.socket, document: dict[str, Any]) -> None:
    connection.sendall(json.dumps(document, ensure_ascii=False, sort_keys=True).encode() + b"\n")


def send(path: Path, document: dict[str, Any], timeout: float = IO_TIMEOUT_SECONDS) -> dict[str, Any]:
    """Send one request over the channel at path; its reply. OSError when no docket serves it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as s:
        s.settimeout(timeout)
        with _short_path(path) as name:
            s.connect(name)
        s.sendall(json.dumps(document, ensure_ascii=False).encode() + b"\n")
        line = _read_line(s, 4 * MAX_REQUEST)
    reply = json.loads(line or b"null")
    if not isinstance(reply, dict):
        raise OSError("the channel's reply is not a JSON object")
    return reply


def docket_command() -> list[str]:
    """How an agent's tools start this docket: its program, or its interpreter with ``-m docket``."""

    script = Path(sys.executable).parent / "docket"
    return [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-m", "docket"]


def docket_program(folder: Path) -> Path:
    """One executable that runs this docket, for an agent's configuration that names a program (Codex CLI's
    mcp_servers command): docket's own script, or else a two-line script in the worker's folder that runs its
    interpreter with ``-m docket``."""

    command = docket_command()
    if len(command) == 1:
        return Path(command[0])
    path = folder / "docket"
    _replace(path, f"#!/bin/sh\nexec {shlex.join(command)} \"$@\"\n".encode(), 0o700)
    return path


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Write a file of the generation's own folder afresh (made again by a launch replayed after a crash)."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_mcp_config(folder: Path, channel: Path) -> Path:
    """A Claude Code ``--mcp-config`` file in the worker's folder: docket's MCP server, under the name docket,
    on this generation's channel."""
    command = docket_command()
    document = {"mcpServers": {"docket": {"type": "stdio", "command": command[0],
                                          "args": [*command[1:], "mcp", "--socket", str(channel)], "env": {}}}}
    path = folder / "mcp.json"
    _replace(path, json.dumps(document, indent=2).encode() + b"\n", 0o600)
    return path


def docket_roots() -> list[Path]:
    """What a sandboxed agent must read to run docket's own commands (``docket request``, ``docket mcp``): its
    interpreter's and program's installs, and the folders its package is loaded from."""
    home = os.environ.get("HOME")
    roots = install_roots([], docket_command()[:1] + [sys.executable], Path(home) if home else None)

    packages: set[Path] = set()
    for name in ("docket", "docket.domain", "docket.projections", "docket.adapters", "docket.cli"):  # found, not imported
        spec = find_spec(name)
        if spec is not None and spec.origin:
            packages.add(Path(spec.origin).resolve().parent)
    return sorted({*roots, *packages})
