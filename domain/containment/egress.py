"""Egress by host: the allow-list a launch's network may name, the addresses never reached, the refusals counted. Pure.

Landlock's TCP rules know ports, not hosts, so a host allow-list is enforced in
two places (adapters/world/processes/egress_proxy.py has the proxy's side):

- the kernel: a launch whose network is a list of hosts may TCP-connect to one
  port only, its own egress proxy's on 127.0.0.1 (every other connect, and any
  bind, is refused by Landlock);
- the proxy, in docket's own process, outside the sandbox: it tunnels a
  ``CONNECT host:port`` only when ``host_allowed`` says so, resolves the name
  itself, and refuses when any address it resolves to is one ``refused_address``
  names (loopback, link-local with the cloud metadata address, private, shared,
  unspecified, multicast), whatever name led there: an allowed name that a
  hostile DNS answer points at 169.254.169.254 or the LAN still reaches nothing.

An allow-list entry is ``"api.anthropic.com"`` (that host, port 443),
``"*.githubusercontent.com"`` (any host under it, not the bare domain, port
443), or either with ``:PORT`` (that port instead: ``"example.com:8443"``,
``"*"`` as the port for any). An IP literal is an entry like a name (its
address still checked). Names compare lowercase, without a trailing dot.

The default of an agent whose block names no network (``default_network``): a
known agent program (docs/agents.md's blocks) gets its model API's hosts;
anything else keeps ``"any"``, which ``docket go`` warns about.

Refusals are counted per (host, port) (``RefusalTally``) and recorded when the
launch ends (EgressRefused), bounded: at most ``MAX_REFUSED_HOSTS`` distinct
pairs are named, the total counts every refused connection.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["AGENT_HOSTS", "MAX_REFUSED_HOSTS", "RefusalTally", "default_network", "host_allowed", "host_entry",
           "is_host_list", "refused_address"]

MAX_REFUSED_HOSTS = 32  # distinct (host, port) pairs one EgressRefused names; the rest are counted only
MAX_HOST_LENGTH = 253
DEFAULT_PORT = 443

# The model API hosts of the agents docs/agents.md has blocks for, by program name. aider talks to whichever
# provider its --model names; its block lets OpenAI's and Anthropic's keys through, so those two APIs.
AGENT_HOSTS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com",),
    "codex": ("api.openai.com", "chatgpt.com"),  # an API key, or a ChatGPT sign-in (chatgpt.com/backend-api)
    "aider": ("api.anthropic.com", "api.openai.com"),
}

_SHOWN = re.compile(r"[^a-z0-9._:\[\]*-]")
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")

# Never reached through the proxy, whatever name led there. Checked on the address (an IPv4-mapped IPv6 address
# as its IPv4 one), so 169.254.169.254, 100.100.100.200 (a cloud's metadata in the shared range) and fd00:ec2::254
# are all in.
_REFUSED = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8",  # "this network": 0.0.0.0 reaches the local host
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",  # private (RFC 1918)
    "100.64.0.0/10",  # shared address space (RFC 6598): carrier NAT, some clouds' metadata
    "127.0.0.0/8",  # loopback: docket's own services, the user's databases
    "169.254.0.0/16",  # link-local, the cloud metadata address 169.254.169.254 among them
    "192.0.0.0/24",  # IETF protocol assignments
    "198.18.0.0/15",  # benchmarking
    "224.0.0.0/4", "240.0.0.0/4",  # multicast, reserved and broadcast
    "::/128", "::1/128",  # unspecified, loopback
    "64:ff9b:1::/48",  # local-use NAT64
    "fc00::/7",  # unique local (fd00:ec2::254 is a metadata address)
    "fe80::/10",  # link-local
    "ff00::/8",  # multicast
))


def _host_part(host: str) -> str:
    return host.lower().rstrip(".")


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def host_entry(entry: str) -> str:
    """One allow-list entry checked and put in its normal form (``host`` or ``host:port``, lowercase); ValueError
    saying what is wrong otherwise."""
    if not isinstance(entry, str) or not entry or len(entry) > MAX_HOST_LENGTH + 8:
        raise ValueError(f"{entry!r} is not a host name")
    text = entry.strip().lower()
    if "://" in text or "/" in text or "@" in text:
        raise ValueError(f"{entry!r}: a network entry is a host name (api.anthropic.com), optionally :port; "
                         "no scheme, path or user")
    host, port = text, None
    if text.startswith("["):  # [v6]:port
        close = text.find("]")
        if close < 0:
            raise ValueError(f"{entry!r} is not a host name")
        host, rest = text[1:close], text[close + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{entry!r} is not a host name")
            port = rest[1:]
    elif text.count(":") == 1:
        host, port = text.split(":")
    host = host.rstrip(".")
    if port is not None and port != "*" and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"{entry!r}: the port after ':' is 1 to 65535, or *")
    address = _literal(host)
    if address is None and (not _NAME.match(host) or len(host) > MAX_HOST_LENGTH):
        raise ValueError(f"{entry!r} is not a host name (letters, digits, '-' and '.'; '*.' only as its start)")
    shown = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address) if address else host
    return shown if port is None else f"{shown}:{int(port) if port != '*' else '*'}"


def is_host_list(network: object) -> bool:
    """Whether a network setting is a host allow-list (its entries strings), not "any", "none" or ports."""
    return isinstance(network, (tuple, list)) and bool(network) and all(isinstance(e, str) for e in network)


def _split(entry: str) -> tuple[str, str | None]:
    if entry.startswith("["):
        close = entry.index("]")
        rest = entry[close + 1:]
        return entry[1:close], rest[1:] if rest else None
    host, _, port = entry.partition(":")
    return host, port or None


def host_allowed(host: str, port: int, allowed: Iterable[str]) -> bool:
    """Whether ``CONNECT host:port`` matches an allow-list entry: the exact name (or "*.domain": a name under it)
    and the entry's port (443 when it names none, any for "*")."""
    name = _host_part(host).strip("[]")
    address = _literal(name)
    if address is not None:
        name = str(address)
    for entry in allowed:
        pattern, wanted = _split(entry)
        if wanted is None and port != DEFAULT_PORT or wanted not in (None, "*") and int(wanted) != port:
            continue
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1 and _literal(name) is None:
                return True
        elif name == pattern:
            return True
    return False


def refused_address(address: str) -> str | None:
    """Why the proxy never connects to this address (None: it may): loopback, link-local (metadata), private..."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return "not an address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in ipaddress.ip_network("64:ff9b::/96") or ip in ipaddress.ip_network("2002::/16"):
            # NAT64 and 6to4 embed an IPv4 address: judged by it
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF if ip in ipaddress.ip_network("64:ff9b::/96")
                                             else (int(ip) >> 80) & 0xFFFFFFFF)
            return refused_address(str(embedded))
    for network in _REFUSED:
        if ip.version == network.version and ip in network:
            return f"{ip} is in {network} (loopback, link-local, private or reserved)"
    return None


def default_network(command: Sequence[object] | None) -> str | tuple[str, ...]:
    """An agent's network when its block names none: its model API's hosts when its program is one docs/agents.md
    has a block for (by the program's file name), else "any"."""
    if not command or not isinstance(command[0], str):
        return "any"
    program = command[0].rsplit("/", 1)[-1]
    hosts = AGENT_HOSTS.get(program)
    return hosts if hosts is not None else "any"


@dataclass
class RefusalTally:
    """Refused connections of one launch, counted per (host, port); at most ``limit`` pairs are kept by name."""

    limit: int = MAX_REFUSED_HOSTS
    counts: dict[tuple[str, int], int] = field(default_factory=dict)
    total: int = 0

    def add(self, host: str, port: int) -> None:
        self.total += 1
        key = (_SHOWN.sub("?", _host_part(host))[:MAX_HOST_LENGTH] or "?", port)  # an agent chose these bytes
        if key in self.counts or len(self.counts) < self.limit:
            self.counts[key] = self.counts.get(key, 0) + 1

    def entries(self) -> list[tuple[str, int, int]]:
        """(host, port, count), most refused first."""
        return sorted(((h, p, c) for (h, p), c in self.counts.items()), key=lambda e: (-e[2], e[0], e[1]))
