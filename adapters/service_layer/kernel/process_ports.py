"""The process port: this machine's processes (identity, liveness, gated launch, stopping a group), and a launch
held at its gate. Apart from ports.py so the launcher, which ports.py makes, can name them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import subprocess

    from ....domain.containment.processes import Liveness, ProcessIdentity
    from ...world.processes.lifecycle import LaunchSpec

__all__ = ["GatedHandle", "ProcessPort"]


class GatedHandle(Protocol):
    """A started process held at the launch gate: it runs its command only once opened."""

    identity: ProcessIdentity
    popen: subprocess.Popen[bytes]  # the launcher and the supervisor wait() on it

    def open(self) -> None:
        """Release the gate: the command runs."""
        ...

    def close_without_opening(self) -> None:
        """The held process exits 125 without running the command."""
        ...


class ProcessPort(Protocol):
    """This machine's processes: identity, three-valued liveness, gated launch, stopping a whole group."""

    def this_host(self) -> tuple[str, str]:
        """(host name, boot id) of this machine."""
        ...

    def identity(self, pid: int) -> ProcessIdentity | None:
        """Who runs at pid now; None if nothing does."""
        ...

    def liveness(self, identity: ProcessIdentity) -> Liveness:
        """alive, dead (gone, pid reused, another boot) or unknown (another host, could not tell)."""
        ...

    def group_liveness(self, identity: ProcessIdentity) -> Liveness:
        """Whether anything is left in identity's process group."""
        ...

    def spawn_gated(self, spec: LaunchSpec) -> GatedHandle:
        """Start spec's command in its own process group, held at the gate; its log is created, never reused."""
        ...

    def terminate_group(self, identity: ProcessIdentity, *, grace: float = 5.0, wait: float = 10.0) -> Liveness:
        """SIGTERM the group, SIGKILL it after grace, wait until it is gone; the group's liveness at the end."""
        ...

    def stop_tree(self, identity: ProcessIdentity, *, grace: float = 2.0) -> Liveness:
        """Stop what an ended launch left: its group and every process it detached; dead once all are gone."""
        ...

    def find_orphans_in(self, folders: list[Path]) -> list[ProcessIdentity]:
        """Live processes of this user adopted by init whose working directory lies in one of folders."""
        ...

    def kill(self, identity: ProcessIdentity, *, wait: float = 10.0) -> Liveness:
        """SIGKILL one process (while it is identity); its liveness at the end."""
        ...

    def find_marked(self, name: str, value: str) -> list[tuple[ProcessIdentity, dict[str, str]]]:
        """Live processes of this user whose environment has name=value, each with its DOCKET_* variables."""
        ...
