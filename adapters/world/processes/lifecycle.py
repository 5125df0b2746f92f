"""Real processes: who they are (/proc, psutil), whether they live, starting them behind a gate, stopping a group.

The launch gate: the agent's command is started as
``sh -c 'IFS= read -r _ || exit 125; exec <"$1" || exit 125; shift; exec "$@"' docket-gate STDIN ARGV...``
with the read end of a pipe as its standard input, in a new session (so its
own process group). The shell runs no code of the agent until docket writes a
newline (GatedProcess.open), which docket does only once the identity is in the
ledger. The write end lives in docket alone (pipes are not inherited across
exec), so if docket dies first, the read sees end of file and the shell exits
125 without running the agent. Only then is stdin swapped for the prompt file
(or /dev/null). The gate is stdin, not some fd N, because dash, a common
/bin/sh, reads only single-digit descriptors in redirections.

psutil is imported where it is used: importing this module stays cheap.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ....domain.containment.processes import Liveness, ProcessIdentity, liveness_of
from ....domain.kernel.values import DEFAULT_MAX_LOG
from . import process_tree, landlock
from .host import host_id

from .process_seen import _Seen, _boot_id, _group_members, _seen, _started_no_earlier
from .egress_proxy import adopt_listener
from .child_exit import ChildExit
from ..files.log_cap import cap_log, cut_due
from ..files.logs import log_size
from .pids_limit import PidsLimit

if TYPE_CHECKING:
    from ....domain.containment.sandbox import SandboxPolicy  # pydantic: only where a sandbox is made, never for status

__all__ = [
    "GATE_SCRIPT", "GatedProcess", "LaunchSpec", "LogPathTaken", "PsutilProcesses", "free_port", "hurry_stops",
    "wait_for_group",
]

GATE_SCRIPT = 'IFS= read -r _ || exit 125; exec <"$1" || exit 125; shift; exec "$@"'
GATE_NAME = "docket-gate"  # the gated shell's $0: what ps shows until the agent runs
GATE_CLOSED_EXIT = 125

_hurry = threading.Event()  # set: every group stopped from now on gets its SIGKILL at once, with no grace


def hurry_stops(hurry: bool = True) -> None:
    """A second Ctrl-C: what this process stops (or is stopping) is killed at once, the SIGTERM's grace cut
    short; False: stops take their grace again."""
    if hurry:
        _hurry.set()
    else:
        _hurry.clear()


class LogPathTaken(FileExistsError):
    """Something (a file, a symlink) is already at the log path: a log is only ever created, never reused."""


@dataclass(frozen=True)
class LaunchSpec:
    argv: tuple[str, ...]  # the agent's command, no shell
    cwd: Path
    env: Mapping[str, str]  # the complete environment (already scrubbed by the caller)
    log_path: Path  # created create-only, 0600, in a folder that exists; stdout and stderr both go to it
    stdin_path: Path | None = None  # the prompt file when prompt = "stdin"; else /dev/null
    sandbox: SandboxPolicy | None = None  # enforced between fork and exec (landlock.py); None or not enforced: none


class GatedProcess:
    """A started process held at the gate: it runs the agent's command only after open()."""

    def __init__(self, identity: ProcessIdentity, popen: subprocess.Popen[bytes], gate_fd: int):
        self.identity = identity
        self.popen = popen
        self._gate_fd: int | None = gate_fd

    def open(self) -> None:
        """Release the gate: the shell execs the command. Raises BrokenPipeError if the held process is gone."""
        fd = self._take_gate()
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)

    def close_without_opening(self) -> None:
        """Close the gate unopened: the held process exits 125 without running the command."""
        os.close(self._take_gate())

    def _take_gate(self) -> int:
        if self._gate_fd is None:
            raise ValueError(f"the gate of process {self.identity.pid} was already opened or closed")
        fd, self._gate_fd = self._gate_fd, None
        return fd


class PsutilProcesses:
    """The ProcessPort over this machine's processes."""

    def __init__(self, *, subreaper: bool = False) -> None:
        """subreaper: make this process a child subreaper (process_tree.py), so that stop_tree finds the orphans
        of what it launched; the long-lived docket process is one."""
        if subreaper:
            process_tree.become_subreaper()
        self._host: tuple[str, str] | None = None
        self._children: dict[ProcessIdentity, subprocess.Popen[bytes]] = {}  # spawned here, reaped here if stopped
        self._limits: dict[ProcessIdentity, Any] = {}  # the pids cgroup of each launch that has one (pids_limit.py)

    def this_host(self) -> tuple[str, str]:
        if self._host is None:
            self._host = (host_id(), _boot_id())
        return self._host

    def identity(self, pid: int) -> ProcessIdentity | None:
        seen = _seen(pid)
        if not isinstance(seen, _Seen):
            return None
        host, boot_id = self.this_host()
        return ProcessIdentity(host=host, boot_id=boot_id, pid=pid, pgid=seen.pgid, start_time=seen.start_time)

    def liveness(self, identity: ProcessIdentity) -> Liveness:
        """A zombie is dead: it has ended and only waits for its parent to read its status."""
        host, boot_id = self.this_host()
        if (identity.host, identity.boot_id) != (host, boot_id):
            return liveness_of(identity, host=host, boot_id=boot_id, start_time_now=None, exists=None)
        seen = _seen(identity.pid)
        if isinstance(seen, Exception):
            return liveness_of(identity, host=host, boot_id=boot_id, start_time_now=None, exists=None)
        if seen is None or (seen.zombie and seen.start_time == identity.start_time):
            return liveness_of(identity, host=host, boot_id=boot_id, start_time_now=None, exists=False)
        return liveness_of(identity, host=host, boot_id=boot_id, start_time_now=seen.start_time, exists=True)

    def group_liveness(self, identity: ProcessIdentity) -> Liveness:
        """Whether anything is left of identity's process group (leader included); zombies do not count."""
        host, boot_id = self.this_host()
        if identity.host != host:
            return "unknown"
        if identity.boot_id != boot_id:
            return "dead"
        leader = _seen(identity.pid)
        if isinstance(leader, _Seen) and not leader.zombie and leader.start_time == identity.start_time \
                and leader.pgid == identity.pgid:
            return "alive"  # the common case, without scanning every process
        try:
            os.killpg(identity.pgid, 0)
        except ProcessLookupError:
            return "dead"
        except PermissionError:
            refused = True
        except OSError:
            return "unknown"
        else:
            refused = False
        if not self._owns_group(identity):
            return "dead"
        if refused:
            return "alive"
        return "alive" if any(not m.zombie for m in _group_members(identity.pgid)) else "dead"

    def _owns_group(self, identity: ProcessIdentity) -> bool:
        """Whether pgid still names identity's group, so signalling it cannot hit a stranger.

        The rule: the group is identity's while its leader (pid == pgid) is
        there with identity's start time. A leader there with another start
        time means the pid was reused, which Linux does only once no process
        and no group holds that id: our group is gone, whoever is there now
        is not ours. With the leader gone, members remaining in pgid kept the
        id from being reused, so they are what is left of our group; we also
        ask that each started no earlier than the leader (a group whose id was
        reused and whose new leader also left would still pass: that needs a
        second reuse of the same pid meanwhile, which we accept).
        """
        leader = _seen(identity.pid)
        if identity.pgid != identity.pid:  # not a group of its own: its group is only ours to stop while it runs
            return isinstance(leader, _Seen) and leader.start_time == identity.start_time
        if isinstance(leader, _Seen):
            return leader.start_time == identity.start_time
        if isinstance(leader, Exception):
            return False
        members = _group_members(identity.pgid)
        return bool(members) and all(_started_no_earlier(m, identity) for m in members)

    def spawn_gated(self, spec: LaunchSpec) -> GatedProcess:
        """Raises FileNotFoundError for a program not found (before anything starts), LogPathTaken, and
        landlock.SandboxUnavailable when spec's sandbox cannot be enforced here (nothing starts then either).

        The started process is a child subreaper (see process_tree.py) and, with an enforced sandbox, confined
        by its Landlock ruleset before it execs the gate shell."""

        _require_program(spec)
        ruleset = landlock.Ruleset(spec.sandbox) if spec.sandbox is not None and spec.sandbox.enforced else None
        preexec = ruleset.confine if ruleset is not None else landlock.subreaper_only
        try:
            log_fd = _create_log(spec.log_path)
        except BaseException:
            if ruleset is not None:
                ruleset.close()
            raise
        gate_read, gate_write = os.pipe()
        try:
            with process_tree.started() as own:
                popen = subprocess.Popen(
                    ["/bin/sh", "-c", GATE_SCRIPT, GATE_NAME, str(Path(spec.stdin_path or os.devnull).absolute()),
                     *spec.argv],
                    stdin=gate_read, stdout=log_fd, stderr=log_fd, cwd=spec.cwd, env=dict(spec.env),
                    close_fds=True, start_new_session=True, preexec_fn=preexec,
                )
                own.add(popen.pid)
            if ruleset is not None and ruleset.listener_channel is not None:
                _hand_to_proxy(ruleset.listener_channel.receive(), ruleset.listener_channel.port)
        except BaseException:
            os.close(gate_write)
            spec.log_path.unlink(missing_ok=True)  # nothing ran, nothing was logged: a retry may create it again
            raise
        finally:
            os.close(gate_read)
            os.close(log_fd)
            if ruleset is not None:
                ruleset.close()
        identity = self.identity(popen.pid)
        if identity is None:  # it cannot get past the gate, so it ended on its own: sh itself failed
            os.close(gate_write)
            popen.wait()
            raise OSError(f"the gated shell exited before it could be identified (status {popen.returncode})")
        self._children = {known: child for known, child in self._children.items() if child.poll() is None}
        self._children[identity] = popen
        self._bound(identity, spec)
        return GatedProcess(identity, popen, gate_write)

    def _bound(self, identity: ProcessIdentity, spec: LaunchSpec) -> None:
        """Its pids cgroup, where one can be made: it is still held at its gate, so nothing of it ran yet."""

        limit = PidsLimit.make(spec.env.get("DOCKET_LAUNCH") or f"{os.getpid()}-{identity.pid}")
        if limit is not None:
            if limit.add(identity.pid):
                self._limits[identity] = limit
            else:
                limit.remove()

    def terminate_group(self, identity: ProcessIdentity, *, grace: float = 5.0, wait: float = 10.0) -> Liveness:
        """SIGTERM to the group, SIGKILL after grace if anything is left, then wait until it is positively gone.

        Returns the group's liveness at the end: "dead" unless it outlived
        wait, could not be looked at ("unknown", e.g. another host: never
        signalled), or signalling it was refused. A group whose id no longer
        names identity's group (see _owns_group) is never signalled.
        """
        for sig, patience in ((signal.SIGTERM, grace), (signal.SIGKILL, wait)):
            state = self.group_liveness(identity)
            if state != "alive" or not self._signal_group(identity, sig):
                break
            state = self._wait_group(identity, patience, hurried=sig == signal.SIGTERM)
            if state != "alive":
                break
        self._reap(identity)
        return self.group_liveness(identity)

    def stop_tree(self, identity: ProcessIdentity, *, grace: float = 2.0) -> Liveness:
        """Stop whatever is left of an ended launch: its process group, then every orphan this process adopted
        as a subreaper (a setsid or double-forked daemon); "dead" only once all of it is positively gone."""
        state = self.group_liveness(identity)
        if state == "alive":
            state = self.terminate_group(identity, grace=grace)
        if not process_tree.stop_orphans():
            return "alive"
        limit = self._limits.get(identity)
        if limit is not None:  # anything still in the launch's cgroup (not ours to reap: another's child) is killed
            if not limit.empty_and_remove(lambda: process_tree.stop_orphans(wait=0.05)):
                return "alive"
            del self._limits[identity]
        return state

    def _signal_group(self, identity: ProcessIdentity, sig: signal.Signals) -> bool:
        if not self._owns_group(identity):
            return False
        try:
            os.killpg(identity.pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            return False
        return True

    def _wait_group(self, identity: ProcessIdentity, seconds: float, *, hurried: bool = False) -> Liveness:
        """Wait until the group is gone, or seconds passed (hurried: or hurry_stops() was called)."""
        deadline = time.monotonic() + seconds
        pause = 0.005
        while True:
            self._reap(identity)
            state = self.group_liveness(identity)
            if state != "alive" or time.monotonic() >= deadline or (hurried and _hurry.is_set()):
                return state
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.1)

    def _reap(self, identity: ProcessIdentity) -> None:
        popen = self._children.get(identity)
        if popen is not None and popen.poll() is not None:
            del self._children[identity]

    def find_orphans_in(self, folders: list[Path]) -> list[ProcessIdentity]:
        """Live processes of this user adopted by init whose working directory lies in one of folders (see
        process_tree.adopted_by_init_in)."""
        found = [self.identity(pid) for pid in process_tree.adopted_by_init_in(folders)
                 if not self._another_hosts(pid)]
        return [identity for identity in found if identity is not None and self.liveness(identity) == "alive"]

    def _another_hosts(self, pid: int) -> bool:
        """Whether the process carries another host id's mark (DOCKET_HOST, set by the supervisor that started it):
        two host ids on one machine see each other's processes, and each stops only its own."""
        import psutil

        try:
            mark = psutil.Process(pid).environ().get("DOCKET_HOST")
        except (psutil.Error, OSError):
            return False
        return mark is not None and mark != self.this_host()[0]

    def kill(self, identity: ProcessIdentity, *, wait: float = 10.0) -> Liveness:
        """SIGKILL identity (its pid, only while its start time is identity's); its liveness at the end."""
        deadline = time.monotonic() + wait
        while (state := self.liveness(identity)) == "alive" and time.monotonic() < deadline:
            try:
                os.kill(identity.pid, signal.SIGKILL)
            except OSError:
                pass
            time.sleep(0.01)
        return state

    def find_marked(self, name: str, value: str) -> list[tuple[ProcessIdentity, dict[str, str]]]:
        """Live processes of this user whose environment has name=value, each with the DOCKET_* part of it."""
        import psutil

        uid = os.getuid()
        found = []
        for process in psutil.process_iter():  # not process_iter(attrs): its `info` is shared with other threads'
            try:
                uids = process.as_dict(["uids"])["uids"]
                if uids is None or uids.real != uid or process.pid == os.getpid():
                    continue
                environ = process.environ()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if environ.get(name) != value:
                continue
            identity = self.identity(process.pid)
            if identity is not None and self.liveness(identity) == "alive":
                found.append((identity, {k: v for k, v in environ.items() if k.startswith("DOCKET_")}))
        return found


def _hand_to_proxy(listener: socket.socket | None, port: int) -> None:
    """The launch's listener, made in its loopback-only network (private_network.py), served by its egress proxy."""

    if listener is None or not adopt_listener(port, listener):
        raise OSError(f"the launch's egress proxy (port {port}) could not be given its listener")


def _require_program(spec: LaunchSpec) -> None:
    """Fail now, with a clear error, rather than as exit status 127 once the gate opens."""
    if not spec.argv:
        raise ValueError("no command to launch")
    program = spec.argv[0]
    if "/" in program:
        found = os.access(Path(spec.cwd) / program, os.X_OK)  # a relative path is the agent's cwd's
    else:
        found = shutil.which(program, path=spec.env.get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, f"no executable program {program!r} (PATH of the agent, from its cwd)",
                                program)


def _create_log(path: Path) -> int:
    # O_APPEND: each write lands at the file's end, so a log capped in place (log_cap.py) goes on from its new end
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_APPEND
    try:
        return os.open(path, flags, 0o600)
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ELOOP):
            raise LogPathTaken(error.errno, f"refusing to reuse the log path {path}: something is already there "
                                            "(a log is created only once, and never through a symlink)",
                               str(path)) from None
        raise


def wait_for_group(processes: Any, gated: Any, *, timeout_ms: int, idle_timeout_ms: int | None = None,
                   log_path: Path | None = None, grace: float = 5.0, poll: float = 0.05,
                   max_log: int = DEFAULT_MAX_LOG,
                   stop: Callable[[], bool] | None = None) -> tuple[int, str | None]:
    """Wait for a gated child (a check, a hook) to end; stop its whole group at its timeout, or after
    idle_timeout_ms without its log growing, or as soon as stop() says so (its supervisor was interrupted).
    (returncode, "timeout" | "idle-timeout" | "interrupted" | None); nothing of its group is left running after. Its
    log (log_path) is kept under max_log as it grows and once it ended (log_cap.py)."""

    popen = gated.popen
    with ChildExit(popen) as child_exit:  # its exit ends a poll's wait at once
        code, cause = _watch(processes, gated, child_exit, timeout_ms=timeout_ms, idle_timeout_ms=idle_timeout_ms,
                             log_path=log_path, grace=grace, poll=poll, max_log=max_log, stop=stop)
    processes.stop_tree(gated.identity)  # it ended: nothing it started may outlive it
    if log_path is not None:
        cap_log(log_path, max_log)
    return code, cause


def _watch(processes: Any, gated: Any, child_exit: Any, *, timeout_ms: int, idle_timeout_ms: int | None,
           log_path: Path | None, grace: float, poll: float, max_log: int,
           stop: Callable[[], bool] | None = None) -> tuple[int, str | None]:
    """wait_for_group's loop until the child ended: (returncode, the timeout that stopped its group, or None)."""

    popen = gated.popen
    started = last_output = time.monotonic()
    last_size = 0
    cause = None
    while (code := popen.poll()) is None:
        now = time.monotonic()
        if log_path is not None:
            size = log_size(log_path)
            grown = size != last_size
            if grown:
                last_output = now
            if cut_due(size, max_log, quiet=not grown):  # its middle cut now, not only at the end
                cap_log(log_path, max_log)
                size = log_size(log_path)
            last_size = size  # a cut is not output: only growth keeps the idle timeout away
        if (now - started) * 1000 >= timeout_ms:
            cause = "timeout"
        elif idle_timeout_ms is not None and (now - last_output) * 1000 >= idle_timeout_ms:
            cause = "idle-timeout"
        if cause is None and stop is not None and stop():
            cause = "interrupted"
        if cause is not None:
            processes.terminate_group(gated.identity, grace=grace)
            code = popen.wait()
            break
        child_exit.wait(poll)
    return code, cause


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
