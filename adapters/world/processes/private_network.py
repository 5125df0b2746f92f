"""No way out but the egress proxy: a launch with a host list gets a network namespace of its own, loopback only.

Landlock's TCP rules match a port on every address, so a launch allowed its
egress proxy's port could connect to a remote host listening on that same port
number, and Landlock has no rule for UDP at all. A network namespace holding
nothing but its own loopback closes both: no route leaves it. The proxy must
still be reachable at ``127.0.0.1:<port>`` inside it, so the child, once in its
namespace (made with its private mount namespace, ``private_mounts.py``, while
it still holds CAP_NET_ADMIN there), brings ``lo`` up, binds a listening socket
at that address, and hands the socket to docket over a socket pair made before
the fork (``SCM_RIGHTS``), then closes its own copy. A socket belongs to the
namespace it was made in, wherever its descriptor goes: docket's proxy threads
accept the launch's connections on it and connect onwards from docket's own
namespace. The child binds before ``landlock_restrict_self`` (which then
forbids binding), so the launch cannot listen there itself.

Where no network namespace can be had (checked once per docket process, in a
throwaway child), the launch keeps the Landlock port rule alone, as docs/security.md
says. Costs about 0.3 ms per launch (a namespace with only loopback).
"""

from __future__ import annotations

import fcntl
import socket
import struct
import subprocess
from collections.abc import Callable

__all__ = ["CLONE_NEWNET", "ListenerChannel", "available"]

CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_available: bool | None = None


class ListenerChannel:
    """The socket pair a launch's child sends its loopback listener over; ``step`` runs in the child (preexec),
    ``receive`` in docket after the child has exec'd (None when the child made none)."""

    def __init__(self, port: int):
        self.port = port
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._ifreq = struct.pack("16sH14x", b"lo", 0)

    def step(self) -> int:
        """In the child, inside its new network namespace: lo up, the listener bound and sent. 0 or an errno."""
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
                flags = struct.unpack("16sH14x", fcntl.ioctl(control, _SIOCGIFFLAGS, self._ifreq))[1]
                fcntl.ioctl(control, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
                listener.bind(("127.0.0.1", self.port))
                listener.listen(64)
                socket.send_fds(self._child, [b"L"], [listener.fileno()])
        except OSError as error:
            return error.errno or 1
        self._child.close()
        return 0

    def receive(self) -> socket.socket | None:
        self._child.close()
        try:
            _, fds, _, _ = socket.recv_fds(self._parent, 1, 1, socket.MSG_DONTWAIT)
        except (BlockingIOError, OSError):
            return None
        finally:
            self._parent.close()
        return socket.socket(fileno=fds[0]) if fds else None

    def close(self) -> None:
        self._parent.close()
        self._child.close()


def available(unshare: Callable[[int], int], flags: int) -> bool:
    """Whether a child can make a network namespace with the given namespace flags (tried once per process)."""
    global _available
    if _available is None:

        def probe() -> None:
            if unshare(flags | CLONE_NEWNET) != 0:
                raise OSError("no network namespace")

        try:
            done = subprocess.run(["/bin/sh", "-c", ":"], preexec_fn=probe, close_fds=True, check=False,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _available = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _available = False
    return _available
