"""What a launched process (an agent, a check, a hook) may touch: the sandbox policy, a pure value. Pure.

A policy is an allow-list, never "everything minus secrets": the folders the
process may write (its workspace or execution, its worker's folder, a private
temporary folder), the folders and files it may read and execute (system
folders, the installs its PATH and command come from, its configured extras),
and its network (``"any"``, ``"none"``, TCP ports it may connect to, or hosts
it may reach through docket's egress proxy: ``domain/containment/egress.py``). The
adapter (``adapters/world/processes/landlock.py``) turns it into a Landlock ruleset; the
ledger records it (``SandboxRecord``) with the digest of its canonical JSON, so
a receipt can say exactly what each process could touch.

``enforced = False`` is ``sandbox = "off"``: nothing is restricted, and the
record says so (write and read roots empty, network "any").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints

from ..kernel.canonical import canonical_json

__all__ = ["Confinement", "MAX_ROOTS", "Network", "SandboxPolicy", "SandboxRecord", "extra_path", "network_setting",
           "unsandboxed"]

MAX_ROOTS = 512
Port = Annotated[int, Field(ge=1, le=65535)]
MAX_HOSTS = 100
HostEntry = Annotated[str, StringConstraints(min_length=1, max_length=270, pattern=r"^[a-z0-9*\[][a-z0-9.:*\[\]-]*$")]
Network = Literal["any", "none"] | tuple[Port, ...] | tuple[HostEntry, ...]
Root = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^/[^\x00]*$")]


def network_setting(value: object) -> str | tuple[int, ...] | tuple[str, ...]:
    """A config's network value checked: "any", "none", a list of TCP ports (1..65535), or a list of hosts.

    A list of hosts (``["api.anthropic.com", "*.githubusercontent.com"]``, an
    entry optionally ``host:port``) is enforced by docket's egress proxy: the
    sandbox may connect only to the proxy's port, and the proxy only to those
    hosts, never to a loopback, link-local or private address (domain/containment/egress.py).
    A list mixing ports and hosts is refused: the ports would bypass the proxy.
    """
    if value in ("any", "none"):
        return str(value)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(entry, str) for entry in value):
            from .egress import host_entry

            if len(value) > MAX_HOSTS:
                raise ValueError(f"at most {MAX_HOSTS} hosts in a network list")
            return tuple(sorted({host_entry(entry) for entry in value}))
        ports = []
        for entry in value:
            if isinstance(entry, str):
                raise ValueError(f"{entry!r}: a network list is all TCP ports or all host names, not both (a port "
                                 "would be reached directly, around the egress proxy that enforces the hosts)")
            if isinstance(entry, bool) or not isinstance(entry, int) or not 1 <= entry <= 65535:
                raise ValueError(f"{entry!r} is not a TCP port (1 to 65535)")
            ports.append(entry)
        return tuple(sorted(set(ports)))
    raise ValueError(f'network is "any", "none", a list of TCP ports or a list of host names, not {value!r}')


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
    network: str | tuple[int, ...] | tuple[str, ...] = "any"


def _roots(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({str(p) for p in paths}))


class SandboxPolicy(BaseModel):
    """What one launch may touch. write implies read; read implies execute."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    enforced: bool
    write: Annotated[tuple[Root, ...], Field(max_length=MAX_ROOTS)] = ()
    read: Annotated[tuple[Root, ...], Field(max_length=MAX_ROOTS)] = ()
    network: Network = "any"
    # A host list's egress proxy's port on 127.0.0.1: the one TCP port its ruleset lets it connect to. Not part of
    # the policy's record or digest (each launch's proxy listens on a port of its own); None: no proxy, no TCP.
    _egress_port: int | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, *, write: Iterable[str], read: Iterable[str],
           network: str | tuple[int, ...] | tuple[str, ...]) -> SandboxPolicy:
        """An enforced policy with its roots sorted and unique (a root both written and read is a write root)."""
        writes = _roots(write)
        return cls(enforced=True, write=writes, read=tuple(r for r in _roots(read) if r not in writes),
                   network=network)  # type: ignore[arg-type]

    def through_proxy(self, port: int) -> SandboxPolicy:
        """This policy, its host list enforced by the egress proxy listening on port (127.0.0.1)."""
        copy = self.model_copy()
        copy._egress_port = port
        return copy

    @property
    def egress_port(self) -> int | None:
        return self._egress_port

    def sha256(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump(mode="json"))).hexdigest()

    def record(self) -> SandboxRecord:
        return SandboxRecord(enforced=self.enforced, write_roots=list(self.write), read_roots=list(self.read),
                             network=self.network if isinstance(self.network, str)
                             else cast("list[int] | list[str]", list(self.network)),  # ports or hosts, listed
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
    # a list of hosts: enforced by docket's egress proxy, the only port the sandbox may connect to (domain/containment/egress.py)
    network: Literal["any", "none"] | Annotated[list[Port], Field(max_length=1000)] \
        | Annotated[list[HostEntry], Field(max_length=MAX_HOSTS)]
    policy_sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
