"""The ProcessPort's fake: a table of processes in memory, judged by the same pure liveness rule as real ones."""

from __future__ import annotations

import errno
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from docket.adapters.world.processes.lifecycle import LaunchSpec, LogPathTaken
from docket.domain.containment.processes import Liveness, ProcessIdentity, liveness_of

__all__ = ["FakeGatedProcess", "FakePopen", "FakeProcesses"]


@dataclass
class FakePopen:
    """What the launcher waits on: returncode is None while the fake process runs."""

    pid: int
    returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"fake process {self.pid}", timeout or 0.0)  # it would never end
        return self.returncode


@dataclass
class FakeGatedProcess:
    identity: ProcessIdentity
    popen: FakePopen
    owner: FakeProcesses
    state: str = "held"  # held | opened | closed

    def open(self) -> None:
        self._leave("opened")
        if self.owner.liveness(self.identity) != "alive":
            raise BrokenPipeError(f"fake process {self.identity.pid} is gone")

    def close_without_opening(self) -> None:
        self._leave("closed")
        self.owner.exit(self.identity, 125)

    def _leave(self, state: str) -> None:
        if self.state != "held":
            raise ValueError(f"the gate of process {self.identity.pid} was already {self.state}")
        self.state = state


class FakeProcesses:
    """The ProcessPort over a table of processes in memory, judged by the same pure liveness rule as real ones."""

    def __init__(self, host: str = "fake-host", boot_id: str = "fake-boot"):
        self.host, self.boot_id = host, boot_id
        self.running: dict[int, ProcessIdentity] = {}  # pid -> the process that holds it now
        self.environ: dict[ProcessIdentity, dict[str, str]] = {}
        self.forced: dict[ProcessIdentity, Liveness] = {}  # liveness set by a test, whatever the table says
        self.popens: dict[ProcessIdentity, FakePopen] = {}
        self.spawned: list[LaunchSpec] = []
        self.gates: list[FakeGatedProcess] = []
        self.terminated: list[ProcessIdentity] = []
        self.logs: set[Path] = set()
        self._next_pid = 1000
        self._ticks = 0

    # --- driving the fake ---------------------------------------------------------------------------------------

    def start(self, *, pgid: int | None = None, pid: int | None = None,
              environ: Mapping[str, str] | None = None) -> ProcessIdentity:
        """A process running now (at pid if given: whoever held it before is gone, the pid reused)."""
        if pid is None:
            self._next_pid += 1
            pid = self._next_pid
        self._ticks += 1
        identity = ProcessIdentity(self.host, self.boot_id, pid, pgid if pgid is not None else pid, str(self._ticks))
        self.running[pid] = identity
        self.environ[identity] = dict(environ or {})
        return identity

    def exit(self, identity: ProcessIdentity, returncode: int) -> None:
        """The process ends (if it still runs) with returncode (-N: killed by signal N)."""
        if self.running.get(identity.pid) == identity:
            del self.running[identity.pid]
        popen = self.popens.get(identity)
        if popen is not None and popen.returncode is None:
            popen.returncode = returncode

    def set_liveness(self, identity: ProcessIdentity, liveness: Liveness) -> None:
        self.forced[identity] = liveness

    # --- the port -----------------------------------------------------------------------------------------------

    def this_host(self) -> tuple[str, str]:
        return self.host, self.boot_id

    def identity(self, pid: int) -> ProcessIdentity | None:
        return self.running.get(pid)

    def liveness(self, identity: ProcessIdentity) -> Liveness:
        if identity in self.forced:
            return self.forced[identity]
        now = self.running.get(identity.pid)
        return liveness_of(identity, host=self.host, boot_id=self.boot_id, exists=now is not None,
                           start_time_now=now.start_time if now is not None else None)

    def group_liveness(self, identity: ProcessIdentity) -> Liveness:
        if identity in self.forced:
            return self.forced[identity]
        if identity.host != self.host:
            return "unknown"
        if identity.boot_id != self.boot_id or not self._owns_group(identity):
            return "dead"
        return "alive" if self._members(identity.pgid) else "dead"

    def spawn_gated(self, spec: LaunchSpec) -> FakeGatedProcess:
        if Path(spec.log_path) in self.logs:
            raise LogPathTaken(errno.EEXIST, f"refusing to reuse the log path {spec.log_path}", str(spec.log_path))
        self.logs.add(Path(spec.log_path))
        self.spawned.append(spec)
        identity = self.start(environ=spec.env)
        self.popens[identity] = FakePopen(identity.pid)
        gate = FakeGatedProcess(identity, self.popens[identity], self)
        self.gates.append(gate)
        return gate

    def terminate_group(self, identity: ProcessIdentity, *, grace: float = 5.0, wait: float = 10.0) -> Liveness:
        state = self.group_liveness(identity)
        if state == "alive" and self._owns_group(identity):
            self.terminated.append(identity)
            for member in self._members(identity.pgid):
                self.exit(member, -signal.SIGTERM)
                self.forced.pop(member, None)
            self.forced.pop(identity, None)
        return self.group_liveness(identity)

    def stop_tree(self, identity: ProcessIdentity, *, grace: float = 2.0) -> Liveness:
        state = self.group_liveness(identity)
        return self.terminate_group(identity, grace=grace) if state == "alive" else state

    def find_orphans_in(self, folders: list[Path]) -> list[ProcessIdentity]:
        return []

    def kill(self, identity: ProcessIdentity, *, wait: float = 10.0) -> Liveness:
        if self.liveness(identity) == "alive":
            self.exit(identity, -signal.SIGKILL)
        return self.liveness(identity)

    def find_marked(self, name: str, value: str) -> list[tuple[ProcessIdentity, dict[str, str]]]:
        return [(identity, {k: v for k, v in self.environ[identity].items() if k.startswith("DOCKET_")})
                for identity in self.running.values()
                if self.environ[identity].get(name) == value and self.liveness(identity) == "alive"]

    def _members(self, pgid: int) -> list[ProcessIdentity]:
        return [identity for identity in self.running.values() if identity.pgid == pgid]

    def _owns_group(self, identity: ProcessIdentity) -> bool:
        """The real adapter's rule: the leader there with its start time, or gone with members left in its group."""
        now = self.running.get(identity.pid)
        if identity.pgid != identity.pid:
            return now == identity
        if now is not None:
            return now.start_time == identity.start_time
        return bool(self._members(identity.pgid))

