"""What a launched process (an agent, a check, a hook) may touch: the sandbox policy, a pure value. Pure.

A policy is an allow-list, never "everything minus secrets": the folders the
process may write (its workspace or execution, its worker's folder, a private
temporary folder), the folders and files it may read and execute (system
folders, the installs its PATH and command come from, its configured extras),
and its network (``"any"``, ``"none"`` or TCP ports it may connect to). The
adapter (``adapters/world/landlock.py``) turns it into a Landlock ruleset; the
ledger records it (``SandboxRecord``) with the digest of its canonical JSON, so
a receipt can say exactly what each process could touch.

``enforced = False`` is ``sandbox = "off"``: nothing is restricted, and the
record says so (write and read roots empty, network "any").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .canonical import canonical_json

__all__ = ["Confinement", "MAX_ROOTS", "Network", "SandboxPolicy", "SandboxRecord", "extra_path", "network_setting",
           "unsandboxed"]

MAX_ROOTS = 512
Port = Annotated[int, Field(ge=1, le=65535)]
Network = Literal["any", "none"] | tuple[Port, ...]
Root = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^/[^\x00]*$")]


def network_setting(value: object) -> str | tuple[int, ...]:
    """A config's network value checked: "any", "none" or a list of TCP ports (1..65535).

    "host:port" is refused: Landlock's TCP rules know ports, not hosts, so a host
    could only be enforced by a proxy docket would have to run and trust; a port
    list that looked like a host list would promise what nothing enforces.
    """
    if value in ("any", "none"):
        return str(value)
    if isinstance(value, (list, tuple)):
        ports = []
        for entry in value:
            if isinstance(entry, str) and ":" in entry:
                raise ValueError(f"{entry!r}: a network entry is a TCP port; the sandbox (Landlock) knows ports, not "
                                 "hosts, so write the port alone (e.g. 443) or network = \"any\"")
            if isinstance(entry, bool) or not isinstance(entry, int) or not 1 <= entry <= 65535:
                raise ValueError(f"{entry!r} is not a TCP port (1 to 65535)")
            ports.append(entry)
        return tuple(sorted(set(ports)))
    raise ValueError(f'network is "any", "none" or a list of TCP ports, not {value!r}')


def extra_path(path: str) -> str:
    """A configured extra read or write root: absolute, or under the home folder (``~/...``)."""
    if not (path.startswith("/") or path == "~" or path.startswith("~/")):
        raise ValueError(f"{path!r}: an extra sandbox path is absolute or starts with ~/")
    if "\x00" in path or ".." in path.split("/"):
        raise ValueError(f"{path!r}: an extra sandbox path has no '..' and no NUL")
    return path


@dataclass(frozen=True)
class Confinement:
    """What the configuration asks of one launch's sandbox: docket.toml's sandbox, and the agent's (check's,
    hook's) extra roots and network; the launch adds the roots its own work needs."""

    mode: Literal["landlock", "off"] = "landlock"
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: str | tuple[int, ...] = "any"


def _roots(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({str(p) for p in paths}))


class SandboxPolicy(BaseModel):
    """What one launch may touch. write implies read; read implies execute."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    enforced: bool
    write: Annotated[tuple[Root, ...], Field(max_length=MAX_ROOTS)] = ()
    read: Annotated[tuple[Root, ...], Field(max_length=MAX_ROOTS)] = ()
    network: Network = "any"

    @classmethod
    def of(cls, *, write: Iterable[str], read: Iterable[str], network: str | tuple[int, ...]) -> SandboxPolicy:
        """An enforced policy with its roots sorted and unique (a root both written and read is a write root)."""
        writes = _roots(write)
        return cls(enforced=True, write=writes, read=tuple(r for r in _roots(read) if r not in writes),
                   network=network)  # type: ignore[arg-type]

    def sha256(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump(mode="json"))).hexdigest()

    def record(self) -> SandboxRecord:
        return SandboxRecord(enforced=self.enforced, write_roots=list(self.write), read_roots=list(self.read),
                             network=self.network if isinstance(self.network, str) else list(self.network),
                             policy_sha256=self.sha256())


def unsandboxed() -> SandboxPolicy:
    """sandbox = "off": the process runs with everything its user may do."""
    return SandboxPolicy(enforced=False)


class SandboxRecord(BaseModel):
    """The sandbox a launch ran in, as the ledger keeps it (WorkerLaunched, CheckLaunched, HookRequested)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    enforced: bool
    write_roots: Annotated[list[Root], Field(max_length=MAX_ROOTS)]
    read_roots: Annotated[list[Root], Field(max_length=MAX_ROOTS)]
    network: Literal["any", "none"] | Annotated[list[Port], Field(max_length=1000)]
    policy_sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
