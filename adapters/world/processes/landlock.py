"""Landlock, by direct system calls: a SandboxPolicy made into a ruleset here, enforced in the child before exec.

Why not the ``landlock`` package on PyPI: its latest release (1.0.0.dev5) is a
development pre-release that handles file-system rights only (up to ABI 5): no
TCP port rules (ABI 4), no scoping of signals and abstract unix sockets (ABI 6),
and its ``Ruleset.apply()`` restricts the calling process, while docket must
build the ruleset in the parent and restrict only the child between fork and
exec. The three system calls and their structs fit in this module.

How a launch is confined:

1. In docket (the parent): ``Ruleset(policy)`` creates a ruleset handling every
   right the running kernel knows (its ABI, 1 to 7: rights a kernel lacks are
   dropped, and ``effective`` says what the policy then means), opens each root
   ``O_PATH`` and adds a rule for it (a root that does not exist is left out).
2. In the child, after fork and before exec (Popen's ``preexec_fn``, which runs
   before the descriptors are closed, so the ruleset's is still open):
   its private mount namespace (``private_mounts.py``: no unix socket it was
   not given, a fresh ``/dev/shm`` of its own, allowed here; where none can be
   made, a seccomp filter refusing unix sockets instead, after no_new_privs),
   every capability dropped (bounding set, securebits locked so exec as uid 0
   grants none, ambient, then the process's own sets),
   ``prctl(PR_SET_NO_NEW_PRIVS)``, ``landlock_restrict_self`` and
   ``prctl(PR_SET_CHILD_SUBREAPER)``, nothing else: docket has threads, so the
   child does no allocation Python can avoid (the ctypes functions and their
   arguments are bound in the parent).

What the kernel then refuses the process and everything it starts: opening,
creating, renaming or removing anything outside the roots (read roots: read and
execute; write roots: everything), TCP connect and bind except to the allowed
ports (ABI 4; for a list of hosts, only the port of the launch's egress proxy,
``egress_proxy.py``), signalling a process outside the sandbox or reaching its
abstract unix sockets (ABI 6), and ptrace of, or reading ``/proc/<pid>/environ``
or ``mem`` of, any process outside it (every ABI). Landlock does not cover UDP.
And no capability, even when docket runs as root.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ....domain.containment.sandbox import SandboxPolicy
from . import private_mounts
from .private_network import ListenerChannel

if TYPE_CHECKING:
    from .private_network import ListenerChannel

__all__ = ["Ruleset", "SandboxUnavailable", "abi_version"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 38, 36
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_NO_CAP_AMBIENT_RAISE set, each locked, and SECBIT_KEEP_CAPS
# locked off: an exec as uid 0 grants no capability, and nothing the process runs can undo it.
_SECUREBITS = (1 << 0 | 1 << 1) | (1 << 2 | 1 << 3) | (1 << 5) | (1 << 6 | 1 << 7)
_CAP_SETPCAP = 8
_CAPABILITY_VERSION_3 = 0x20080522

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may carry
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_READ = EXECUTE | READ_FILE | READ_DIR
_DEVICE = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV  # /dev/null and its kind: read, write, no execute
# Global /proc files tools read (CPU count, memory, load): never /proc itself, which holds every process's environ.
PROC_FILES = tuple(f"/proc/{name}" for name in ("cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version",
                                                  "filesystems", "sys", "mounts", "cgroups", "pressure"))
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class SandboxUnavailable(OSError):
    """This kernel (or system) cannot enforce a sandbox."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_libc: ctypes.CDLL | None = None
_abi: int | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.prctl.restype = ctypes.c_int
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        libc.capset.restype = ctypes.c_int
        libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        _libc = libc
    return _libc


def abi_version() -> int:
    """The Landlock ABI this kernel offers: 0 when it has none (not Linux, too old, or Landlock switched off)."""
    global _abi
    if _abi is None:
        if not sys.platform.startswith("linux"):
            _abi = 0
        else:
            version = _c().syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0),
                                   ctypes.c_uint32(_CREATE_RULESET_VERSION))
            _abi = max(0, int(version))
    return _abi


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI.get(abi, _FS_BY_ABI[5])


def effective(policy: SandboxPolicy, abi: int) -> SandboxPolicy:
    """What the policy means on a kernel of this ABI: a network restriction needs ABI 4, else it is "any"."""
    if policy.enforced and abi < 4 and policy.network != "any":
        return policy.model_copy(update={"network": "any"})
    return policy


def connect_ports(policy: SandboxPolicy) -> tuple[int, ...]:
    """The TCP ports the policy may connect to: its ports, or for a host list only its egress proxy's (none when no
    proxy was started for it: a host list never falls back to direct connections)."""
    network = policy.network
    if not isinstance(network, tuple):
        return ()
    if all(isinstance(entry, int) for entry in network):
        return tuple(int(entry) for entry in network)
    return (policy.egress_port,) if policy.egress_port is not None else ()


class Ruleset:
    """A policy's Landlock ruleset, open in this process; ``confine`` is the preexec function that enforces it."""

    def __init__(self, policy: SandboxPolicy):
        abi = abi_version()
        if abi < 1:
            raise SandboxUnavailable(errno.ENOSYS, "this kernel offers no Landlock (Linux 5.13 or later, with "
                                                   "landlock in its lsm= list)")
        self.policy = effective(policy, abi)
        fs = _fs_rights(abi)
        net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and self.policy.network != "any" else 0
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
        attr = _RulesetAttr(fs, net, scoped)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        libc = _c()
        fd = libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                          ctypes.c_uint32(0))
        if fd < 0:
            raise SandboxUnavailable(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
        self.fd: int | None = int(fd)
        self.listener_channel: ListenerChannel | None = None
        try:
            for root in self.policy.write:
                self._add_path(root, fs)
            for root in self.policy.read:
                self._add_path(root, _READ & fs)
            for device in DEVICES:
                self._add_path(device, _DEVICE & fs)
            for entry in PROC_FILES:
                self._add_path(entry, _READ & fs)
            for port in connect_ports(self.policy) if net else ():
                self._add_rule(_RULE_NET_PORT, _NetPortAttr(NET_CONNECT_TCP, port))
        except BaseException:
            self.close()
            raise

        egress = self.policy.egress_port if net else None
        # the proxy's own listener inside the launch's network namespace: sent over here by the child (see there)
        self.listener_channel = (ListenerChannel(egress) if egress is not None and private_mounts.network_available()
                                 else None)
        self.confine = _confiner(self.fd, fs, (*self.policy.write, *self.policy.read), self.listener_channel)

    def _add_path(self, path: str, access: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return  # nothing there to allow; a root made later is not reachable, which is the safe way round
        try:
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                access &= _FILE_ONLY
            self._add_rule(_RULE_PATH_BENEATH, _PathBeneathAttr(access, fd))
        finally:
            os.close(fd)

    def _add_rule(self, rule_type: int, attr: ctypes.Structure) -> None:
        assert self.fd is not None, "the ruleset is closed"
        done = _c().syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(rule_type),
                            ctypes.byref(attr), ctypes.c_uint32(0))
        if done != 0:
            number = ctypes.get_errno()
            raise SandboxUnavailable(number, f"landlock_add_rule: {os.strerror(number)}")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.listener_channel is not None:
            self.listener_channel.close()

    def __enter__(self) -> Ruleset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def subreaper_only() -> None:
    """preexec for an unsandboxed launch: still the subreaper of everything it starts.

    It keeps its capabilities: ``sandbox = "off"`` is the user's written choice
    to run a launch with everything docket's user may do (a hook that drives
    docker or a firewall as root, say), and a launch that kept root's uid while
    losing its capabilities would be neither confined nor what was asked. With
    the sandbox on, every capability is dropped, always (``_confiner``).
    """
    _c().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _last_capability() -> int:
    """The highest capability number this kernel knows (read in the parent: the child must not open files)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 63  # every bit a 64-bit set can hold: dropping one the kernel does not know fails harmlessly


def _may_set_pcap() -> bool:
    """Whether this process holds CAP_SETPCAP, which dropping the bounding set and setting securebits need (root
    does; an ordinary user has no capability to drop, and the bounding set binds nothing it could gain)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SETPCAP & 1)
    except (OSError, ValueError, IndexError):
        pass
    return os.geteuid() == 0


def _capability_dropper() -> Callable[[], int]:
    """The preexec step that leaves the process no capability, and none to regain by exec (docket often runs as
    root: containers, CI): the bounding set emptied, securebits locked (exec as uid 0 grants nothing), the ambient
    set cleared, then effective, permitted and inheritable zeroed. Returns 0, or the errno of the step that failed.
    Everything is bound here, in the parent."""
    libc = _c()
    prctl, capset = libc.prctl, libc.capset
    drop, securebits, ambient, clear_all = _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, \
        _PR_CAP_AMBIENT_CLEAR_ALL
    bits, capabilities = _SECUREBITS, tuple(range(_last_capability() + 1))
    privileged = _may_set_pcap()
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    header_ref, data_ref = ctypes.byref(header), ctypes.byref(data)
    get_errno = ctypes.get_errno

    def drop_capabilities() -> int:
        if privileged:
            for capability in capabilities:
                if prctl(drop, capability, 0, 0, 0) != 0:
                    return get_errno() or 1
            if prctl(securebits, bits, 0, 0, 0) != 0:
                return get_errno() or 1
        if prctl(ambient, clear_all, 0, 0, 0) != 0 and get_errno() != errno.EINVAL:  # EINVAL: a kernel before 4.3
            return get_errno() or 1
        if capset(header_ref, data_ref) != 0:
            return get_errno() or 1
        return 0

    return drop_capabilities


def _confiner(ruleset_fd: int, fs: int, roots: tuple[str, ...] = (),
              listener: ListenerChannel | None = None) -> Callable[[], None]:
    """The preexec function: its private mounts (and with a listener channel, its loopback-only network, the egress
    proxy's listener made there and sent: ``private_network.py``), its own /proc/<pid> and /dev/shm allowed, no
    capability, no new privileges, restrict (with no unix socket where it has no private mounts), subreaper.

    The private mount namespace (``private_mounts.py``: no unix socket the
    launch was not given, a /dev/shm of its own) comes first, while the child
    still holds CAP_SYS_ADMIN (root's, or its new user namespace's): the
    capabilities go after it, Landlock last (a restricted process may not
    mount). The fresh /dev/shm is allowed in the child, where it exists; where
    no namespace can be had, it is not allowed at all, and a seccomp filter
    refuses every unix socket instead.

    Every object it uses is made here, first. /proc as a whole is not a read
    root: on this kernel family a sandboxed process may open another's
    /proc/<pid>/environ (Landlock's ptrace check does not cover it), so only
    global /proc files are allowed (PROC_FILES) and, added here in the child,
    the launched process's own /proc/<pid> (the agent itself: the gate shell
    execs it at the same pid), which tools read as /proc/self. The capabilities
    go before ``landlock_restrict_self`` (which then holds by no_new_privs, not
    by CAP_SYS_ADMIN): a sandboxed process running as root could otherwise
    override file permissions, change the host's name or its network, load
    modules, or ptrace what Landlock does not scope.
    """
    libc = _c()
    prctl, syscall, open_, close = libc.prctl, libc.syscall, libc.open, libc.close
    no_new_privs, subreaper = _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER
    restrict, add_rule, fd, flags = (ctypes.c_long(_RESTRICT_SELF), ctypes.c_long(_ADD_RULE),
                                     ctypes.c_int(ruleset_fd), ctypes.c_uint32(0))
    proc_self, o_path = ctypes.c_char_p(b"/proc/self"), ctypes.c_int(os.O_PATH | os.O_CLOEXEC)
    path_beneath = ctypes.c_int(_RULE_PATH_BENEATH)
    own = _PathBeneathAttr(_READ & fs, -1)
    own_ref = ctypes.byref(own)
    drop_capabilities = _capability_dropper()

    enter = (private_mounts.private_mounts(roots, network=listener is not None) if private_mounts.available()
             else None)
    no_unix_sockets = private_mounts.no_unix_sockets() if enter is None else None
    if enter is None and no_unix_sockets is None:
        raise SandboxUnavailable(errno.ENOSYS, "this system can neither give a launch a private mount namespace nor "
                                               "filter its unix sockets (seccomp), so its sockets cannot be kept out")
    fresh_shm = enter is not None and getattr(enter, "fresh_shm", False)
    shm, shm_rule = ctypes.c_char_p(private_mounts.SHM.encode()), _PathBeneathAttr(fs, -1)
    shm_ref = ctypes.byref(shm_rule)

    def confine() -> None:
        if enter is not None:
            failed = enter()
            if failed:
                raise OSError(failed, "making the private mount namespace failed")
            failed = listener.step() if listener is not None else 0
            if failed:
                raise OSError(failed, "giving the egress proxy a listener in the launch's network failed")
            shm_rule.parent_fd = open_(shm, o_path) if fresh_shm else -1
            if shm_rule.parent_fd >= 0:
                syscall(add_rule, fd, path_beneath, shm_ref, flags)
                close(shm_rule.parent_fd)
        own.parent_fd = open_(proc_self, o_path)
        if own.parent_fd >= 0:
            syscall(add_rule, fd, path_beneath, own_ref, flags)
            close(own.parent_fd)
        failed = drop_capabilities()
        if failed:
            raise OSError(failed, "dropping capabilities failed")
        if prctl(no_new_privs, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs failed")
        if no_unix_sockets is not None and no_unix_sockets() != 0:
            raise OSError(ctypes.get_errno(), "the seccomp filter failed")
        if syscall(restrict, fd, flags) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
        prctl(subreaper, 1, 0, 0, 0)

    return confine
