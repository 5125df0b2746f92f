"""docket's egress proxy: the one place a sandboxed launch with a host allow-list can reach the network through.

Why a proxy of docket's own, and this small: Landlock's TCP rules know ports,
not hosts, so a host allow-list needs something outside the sandbox that
knows the host a connection is for. Every sandbox that filters by host does it
this way (Anthropic's sandbox-runtime, the Codex network proxy, Docker
Sandboxes, Copilot's firewall): an HTTP proxy the sandboxed process is pointed
at, and a kernel rule that leaves it no other way out. The agents docket runs
speak HTTPS to their model APIs, and every HTTP client they use (Node's undici
and its global agent, Python's httpx and requests, curl, git) honours
``HTTPS_PROXY`` with ``CONNECT``. A CONNECT-only proxy is about two hundred
lines with no parsing of anything but one request line and its headers, and
it never sees the TLS inside the tunnel; a kept library (proxy.py, mitmproxy)
would bring a plugin system, TLS interception and a far larger surface into
docket's own process for nothing the allow-list needs. Plain-HTTP forwarding is
left out on purpose: a model API is HTTPS, and a plain request is refused (and
counted) rather than forwarded.

How it works:

- One proxy per launch (``open_proxy``), listening on 127.0.0.1 on a port of
  its own, served by threads of docket's process (the one supervising the
  launch), so it knows whose connection it has by the port alone, with no
  credential in the environment to steal or replay.
- The launch's environment names it (``proxy_environment``: HTTPS_PROXY,
  HTTP_PROXY, ALL_PROXY in both cases, NO_PROXY empty) and its Landlock ruleset
  allows TCP connect to that port only (``landlock.connect_ports``).
- ``CONNECT host:port``: refused with 403 unless ``domain.egress.host_allowed``;
  the name is resolved here, and refused when any of its addresses is one
  ``domain.egress.refused_address`` names (the metadata address, loopback,
  private ranges), so an allowed name pointed elsewhere by DNS reaches nothing;
  then connected to the address checked (not resolved again), 200, and bytes
  copied both ways until either side closes.
- Every refusal is counted per (host, port) (``RefusalTally``), and
  ``close_proxy`` hands the count over when the launch ends (EgressRefused).

- Landlock allows the proxy's port number on every address, and has no rule
  for UDP, so the launch also gets a network namespace with loopback alone
  (``private_network.py``): its child binds the proxy's port on its own
  127.0.0.1 and hands the listener over (``adopt_listener``), and nothing else
  leaves the namespace. Where no network namespace can be had, the port rule
  is all there is: a process that knows the port could reach a remote host
  listening on that same port number, and send UDP.
- The proxy lives in the docket process that launched the agent. A launch
  whose docket process died (and whose run another process took over) keeps
  its namespace but loses its proxy: its connections fail from then on, closed
  rather than open.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Callable, Iterable, Sequence

from ....domain.containment.egress import RefusalTally, host_allowed, refused_address

__all__ = ["EgressProxy", "adopt_listener", "close_proxy", "open_proxy", "proxy_environment"]

MAX_HEAD = 16 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
MAX_TUNNELS = 256  # concurrent tunnels of one launch; more are refused with 503 (not counted as egress refusals)

Resolver = Callable[[str, int], Sequence[str]]


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class EgressProxy:
    """One launch's CONNECT proxy: the allow-list it enforces, the refusals it counted.

    ``allow_addresses``: addresses that ``refused_address`` would refuse but this proxy may reach anyway; never
    set by docket itself (tests set it to reach a server of their own on loopback)."""

    def __init__(self, hosts: Iterable[str], *, resolve: Resolver = _resolve, allow_addresses: Iterable[str] = ()):
        self.hosts = tuple(hosts)
        self.tally = RefusalTally()
        self._resolve = resolve
        self._allowed_addresses = frozenset(allow_addresses)
        self._lock = threading.Lock()
        self._tunnels = 0
        self._closed = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._listeners = [self._listener]
        self._threads = [threading.Thread(target=self._serve, args=(self._listener,),
                                          name=f"docket-egress-{self.port}", daemon=True)]
        self._threads[0].start()

    def adopt(self, listener: socket.socket) -> None:
        """Serve a listener made at this proxy's port inside a launch's own network namespace as well."""
        thread = threading.Thread(target=self._serve, args=(listener,), name=f"docket-egress-{self.port}-ns",
                                  daemon=True)
        with self._lock:
            closed = self._closed.is_set()
            if not closed:
                self._listeners.append(listener)
                self._threads.append(thread)
        if closed:
            listener.close()
            return
        thread.start()

    def refused(self) -> RefusalTally:
        with self._lock:
            copy = RefusalTally(self.tally.limit, dict(self.tally.counts), self.tally.total)
        return copy

    def close(self) -> RefusalTally:
        """Stop listening (tunnels already open end with their connections) and hand over the refusals."""
        with self._lock:
            self._closed.set()
            listeners, threads = list(self._listeners), list(self._threads)
        for listener in listeners:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for thread in threads:
            thread.join(timeout=5)
        return self.refused()

    def _serve(self, listener: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _refuse(self, host: str, port: int) -> None:
        with self._lock:
            self.tally.add(host, port)

    def _handle(self, client: socket.socket) -> None:
        with client:
            client.settimeout(HEAD_TIMEOUT)
            head = _read_head(client)
            if head is None:
                return
            request = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request.split(" ")
            if len(parts) != 3 or parts[0].upper() != "CONNECT":
                target = _plain_target(parts)
                if target is not None:
                    self._refuse(*target)
                _answer(client, 405, "docket's egress proxy tunnels HTTPS only (CONNECT host:443)")
                return
            target = _authority(parts[1])
            if target is None:
                _answer(client, 400, "CONNECT names host:port")
                return
            host, port = target
            if not host_allowed(host, port, self.hosts):
                self._refuse(host, port)
                _answer(client, 403, f"{host}:{port} is not in this launch's network allow-list")
                return
            try:
                addresses = list(self._resolve(host, port))
            except OSError:
                _answer(client, 502, f"{host} does not resolve")
                return
            bad = [a for a in addresses if a not in self._allowed_addresses and refused_address(a)]
            if bad or not addresses:
                self._refuse(host, port)
                _answer(client, 403, f"{host} resolves to {bad[0] if bad else 'nothing'}, which docket's egress "
                                     "proxy never reaches (loopback, link-local, private or reserved)")
                return
            with self._lock:
                if self._tunnels >= MAX_TUNNELS:
                    busy = True
                else:
                    busy, self._tunnels = False, self._tunnels + 1
            if busy:
                _answer(client, 503, "too many tunnels open")
                return
            try:
                self._tunnel(client, addresses, port)
            finally:
                with self._lock:
                    self._tunnels -= 1

    def _tunnel(self, client: socket.socket, addresses: list[str], port: int) -> None:
        upstream = None
        for address in addresses:  # each one checked above; connected to as checked, never resolved again
            try:
                upstream = socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)
                break
            except OSError:
                continue
        if upstream is None:
            _answer(client, 502, "no address of the host accepted the connection")
            return
        with upstream:
            client.settimeout(None)
            upstream.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pipe(client, upstream, self._closed)


def _read_head(client: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            return None
        try:
            chunk = client.recv(4096)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return None if rest else head  # a client that sends its TLS before the 200 is not one to tunnel for


def _authority(text: str) -> tuple[str, int] | None:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535 or len(host) > 253:
        return None
    return host.lower(), int(port)


def _plain_target(parts: list[str]) -> tuple[str, int] | None:
    """The host a plain-HTTP proxy request (``GET http://host/...``) named, to count its refusal."""
    if len(parts) != 3 or "://" not in parts[1]:
        return None
    scheme, _, rest = parts[1].partition("://")
    authority = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    default = 443 if scheme.lower() == "https" else 80
    found = _authority(authority if ":" in authority.rsplit("]", 1)[-1] else f"{authority}:{default}")
    return found


def _answer(client: socket.socket, status: int, message: str) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 502: "Bad Gateway",
               503: "Service Unavailable"}
    body = (message + "\n").encode("utf-8", "replace")
    try:
        client.sendall(f"HTTP/1.1 {status} {reasons[status]}\r\nContent-Type: text/plain\r\nContent-Length: "
                       f"{len(body)}\r\nConnection: close\r\n\r\n".encode("ascii") + body)
    except OSError:
        pass


def _pipe(a: socket.socket, b: socket.socket, closed: threading.Event) -> None:
    peers = {a: b, b: a}
    open_ = [a, b]
    while open_ and not closed.is_set():
        try:
            readable, _, _ = select.select(open_, [], [], 1.0)
        except (OSError, ValueError):
            return
        for sock in readable:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                open_.remove(sock)
                try:
                    peers[sock].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            try:
                peers[sock].sendall(data)
            except OSError:
                return


_proxies: dict[str, EgressProxy] = {}
_registry = threading.Lock()


def open_proxy(key: str, hosts: Iterable[str], **options: object) -> EgressProxy:
    """The egress proxy of the launch named key (a worker generation: ``worker/generation``), started now; one
    already open for key is closed first (its refusals dropped: a launch that never ran made none worth keeping)."""
    proxy = EgressProxy(hosts, **options)  # type: ignore[arg-type]
    with _registry:
        previous = _proxies.pop(key, None)
        _proxies[key] = proxy
    if previous is not None:
        previous.close()
    return proxy


def adopt_listener(port: int, listener: socket.socket) -> bool:
    """Hand a launch's in-namespace listener to the open proxy on port; False when none of this process is."""
    with _registry:
        proxy = next((p for p in _proxies.values() if p.port == port), None)
    if proxy is None:
        listener.close()
        return False
    proxy.adopt(listener)
    return True


def close_proxy(key: str) -> RefusalTally | None:
    """Stop the launch's proxy; what it refused (None: no proxy of this process served that launch)."""
    with _registry:
        proxy = _proxies.pop(key, None)
    return None if proxy is None else proxy.close()


def proxy_environment(port: int) -> dict[str, str]:
    """The variables that point a launch's HTTP clients at its proxy (lower and upper case: tools read either)."""
    url = f"http://127.0.0.1:{port}"
    env = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy",
                                  "all_proxy")}
    env.update(NO_PROXY="", no_proxy="")
    return env
