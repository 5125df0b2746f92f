"""No unix socket a sandboxed launch was not given: a private mount namespace, made in the child before exec.

Landlock (ABI 6 and later) scopes abstract unix sockets and signals, but it
does not govern ``connect()`` on a pathname unix socket: a sandboxed process
that can name ssh-agent's socket (``/tmp/ssh-*/agent.*``), gpg-agent's
(``~/.gnupg/S.gpg-agent``, ``/run/user/<uid>/gnupg``), PostgreSQL's
(``/var/run/postgresql/.s.PGSQL.5432``), docker's (``/run/docker.sock``,
``~/.docker/run/docker.sock``), D-Bus's or X11's (``/tmp/.X11-unix``) could
talk to it, even where it cannot read a single file next to it.

The choice: a private mount namespace, not a seccomp filter on connect. A
seccomp filter cannot read the address ``connect()`` is given (a pointer), so
it can only refuse unix sockets altogether, and docket's own request channel
(``<worker folder>/docket.sock``, which the agent's ``docket request`` and
``docket mcp`` reach) is one. A mount namespace hides the places sockets live
and gives back only what the policy allows, so the channel, which lies in a
write root, keeps working.

What the child does, between fork and exec, before its capabilities are dropped
and before ``landlock_restrict_self`` (mounting needs CAP_SYS_ADMIN, and a
Landlock-restricted process may not mount at all):

1. ``unshare(CLONE_NEWNS)`` when docket holds CAP_SYS_ADMIN (root); otherwise
   ``unshare(CLONE_NEWUSER | CLONE_NEWNS)`` with its own uid and gid mapped to
   themselves (``setgroups`` denied first): files it makes stay the user's.
2. Every mount made private (``MS_REC | MS_PRIVATE``): nothing propagates back.
3. Each policy root lying in a hidden folder (below) cloned (``open_tree``),
   by its real path, before the folder is covered.
4. An empty tmpfs over each hidden folder: ``/tmp``, ``/var/tmp``, ``/run``
   (``/var/run`` with it, or alone where it is not a link to ``/run``), the home
   folder (with ``~/.ssh``, ``~/.gnupg``, ``~/.docker`` and every other socket
   the user keeps there) and ``XDG_RUNTIME_DIR``; a folder the policy allows
   whole (a root at or above it) is left as it is.
5. Each cloned root moved back at its real path, and at the path it was
   written as when that differs (a link on the way): the workspace, the worker
   folder with its request channel and its private TMPDIR, ``~/.gitconfig``,
   the installs on PATH, ``/run/systemd/resolve``... The hidden tmpfs are then
   made read-only.
6. A fresh tmpfs on ``/dev/shm`` (``SHM_SIZE``), the launch's own: what it
   leaves there goes with its last process. (Landlock then allows it in the
   child, where it is made: ``landlock.py``.)
7. Its working folder entered again by name, so that ``..`` from it leads
   through the new mounts, not the covered ones.

So a pathname socket a sandboxed process can still connect to lies in a root
docket put in its policy (its workspace, its worker folder, a configured extra)
or in a system folder outside the hidden ones (``/dev/log`` where it is not a
link into ``/run``, ``/var/lib/...``): none of the user's agents, databases,
docker or desktop bus. Abstract sockets are Landlock's (ABI 6). A process that
outlives its launch keeps its namespace, as it keeps everything else, until
docket's group kill ends it. The namespace costs about a millisecond per launch
(measured: a sandboxed ``/bin/true`` with 33 roots given back, median of 30, 10.2
ms against 9.0 ms without it), and the first launch of a docket process about
as much again for ``available``'s probe.

Where the namespace cannot be made (unprivileged user namespaces disabled, a
container's seccomp profile), checked once per docket process by a throwaway
child (``available``), the launch instead gets a seccomp filter that refuses
``socket(AF_UNIX, ...)`` (``EACCES``) and, on x86-64, every 32-bit or x32 system
call: no unix socket at all, docket's request channel included, and no
``/dev/shm``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["SHM", "SHM_SIZE", "available", "hidden_folders", "network_available", "no_unix_sockets",
           "private_mounts"]

SHM = "/dev/shm"
SHM_SIZE = 64 * 1024 * 1024
_SYSTEM_HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run")
# a home folder that is, holds or lies in one of these is not hidden (HOME=/ or HOME=/usr would hide the system)
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/sys", "/proc",
           "/dev", "/boot")

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_OPEN_TREE, _MOVE_MOUNT = 428, 429  # the same number on every architecture
_OPEN_TREE_CLONE, _AT_RECURSIVE, _AT_FDCWD, _MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, -100, 0x4
_CAP_SYS_ADMIN = 21

_libc: ctypes.CDLL | None = None
_available: bool | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.unshare.argtypes = [ctypes.c_int]
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        libc.mkdir.argtypes = [ctypes.c_char_p, ctypes.c_uint]
        libc.open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint]
        libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        libc.write.restype = ctypes.c_ssize_t
        libc.close.argtypes = [ctypes.c_int]
        libc.chdir.argtypes = [ctypes.c_char_p]
        libc.getcwd.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        libc.getcwd.restype = ctypes.c_void_p  # an address, not a bytes object made in the child
        libc.prctl.restype = ctypes.c_int
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _libc = libc
    return _libc


def _namespace_flags(privileged: bool) -> int:
    return _CLONE_NEWNS if privileged else _CLONE_NEWUSER | _CLONE_NEWNS


def network_available() -> bool:
    """Whether this docket process's launches can also have a network namespace of their own."""
    from . import private_network  # lazily: this module also loads alone, as a file (the ordinary-user test)

    return available() and private_network.available(_c().unshare, _namespace_flags(_has_sys_admin()))


def _has_sys_admin() -> bool:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def hidden_folders(roots: Iterable[str], home: str | None = None, runtime: str | None = None) -> list[str]:
    """The folders covered by an empty tmpfs, by their real paths: the system's socket folders, the home, the
    runtime folder; less any that does not exist, lies in another, or that a root (real path) holds whole."""
    home = os.environ.get("HOME") if home is None else home
    runtime = os.environ.get("XDG_RUNTIME_DIR") if runtime is None else runtime
    candidates = [folder for folder in _SYSTEM_HIDDEN if os.path.isdir(folder) and not os.path.islink(folder)]
    for folder in (home, runtime):
        if folder and os.path.isabs(folder) and os.path.isdir(folder):
            real = os.path.realpath(folder)
            if real != "/" and not any(_inside(real, s) or _inside(s, real) for s in _SYSTEM):
                candidates.append(real)
    reals = [os.path.realpath(root) for root in roots]
    chosen: list[str] = []
    for folder in sorted(set(candidates), key=len):
        if any(_inside(folder, other) for other in chosen) or any(_inside(folder, root) for root in reals):
            continue
        chosen.append(folder)
    return chosen


def _targets(roots: Iterable[str], hidden: list[str]) -> list[tuple[str, str, bool]]:
    """(source, target, is a folder) for each root to give back inside a hidden folder, outermost first; a target in
    another target is reached through it (never mounted on: its mount point would be made in the real folder)."""
    wanted: dict[str, tuple[str, bool]] = {}
    for root in roots:
        real = os.path.realpath(root)
        if not os.path.exists(real):
            continue
        for target in {os.path.normpath(root), real}:
            if any(_inside(target, folder) and target != folder for folder in hidden):
                wanted.setdefault(target, (real, os.path.isdir(real)))
    chosen: list[tuple[str, str, bool]] = []
    for target in sorted(wanted, key=lambda t: (t.count("/"), t)):
        if not any(_inside(target, other) for _, other, _ in chosen):
            chosen.append((wanted[target][0], target, wanted[target][1]))
    return chosen


def _mount_points(targets: list[tuple[str, str, bool]], hidden: list[str]) -> list[str]:
    """The folders to make in the hidden tmpfs, parents first, for the targets to be mounted on."""
    folders: set[str] = set()
    for _, target, _ in targets:
        folder = next(h for h in hidden if _inside(target, h))
        parent = os.path.dirname(target)
        while parent != folder and _inside(parent, folder):
            folders.add(parent)
            parent = os.path.dirname(parent)
    return sorted(folders, key=lambda f: (f.count("/"), f))


def private_mounts(roots: Iterable[str], *, probe: bool = False, network: bool = False) -> Callable[[], int]:
    """The preexec step that puts the child in its private mount namespace (see the module's text): returns 0, or
    the errno of the step that failed. Everything it uses is made here, in the parent: the child only calls. With
    network, the child gets a network namespace of its own as well (``private_network.py``)."""
    roots = list(roots)
    hidden = [f for f in _SYSTEM_HIDDEN[:3] if os.path.isdir(f)][:1] if probe else hidden_folders(roots)
    targets = [] if probe else _targets(roots, hidden)
    folders = _mount_points(targets, hidden)
    libc = _c()
    unshare, mount, mkdir, open_, write, close, syscall = (libc.unshare, libc.mount, libc.mkdir, libc.open,
                                                           libc.write, libc.close, libc.syscall)
    chdir, getcwd, get_errno = libc.chdir, libc.getcwd, ctypes.get_errno
    privileged = _has_sys_admin()
    flags = _namespace_flags(privileged) | (_CLONE_NEWNET if network else 0)
    uid, gid = os.geteuid(), os.getegid()
    maps = () if privileged else tuple((path.encode(), data, len(data)) for path, data in (
        ("/proc/self/setgroups", b"deny"), ("/proc/self/uid_map", f"{uid} {uid} 1".encode()),
        ("/proc/self/gid_map", f"{gid} {gid} 1".encode())))
    o_write, o_create = os.O_WRONLY | os.O_CLOEXEC, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    root, private, covered = b"/", _MS_REC | _MS_PRIVATE, _MS_NOSUID | _MS_NODEV
    read_only = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    tmpfs, small = b"tmpfs", b"size=1m,nr_inodes=4096,mode=755"
    shm, shm_options = SHM.encode(), f"size={SHM_SIZE},mode=1777".encode()
    fresh_shm = not probe and os.path.isdir(SHM) and not any(_inside(SHM, h) for h in hidden)
    covers = tuple(folder.encode() for folder in hidden)
    points = tuple(folder.encode() for folder in folders)
    clone_flags = ctypes.c_uint(_OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC)
    open_tree, move_mount, at_cwd = ctypes.c_long(_OPEN_TREE), ctypes.c_long(_MOVE_MOUNT), ctypes.c_int(_AT_FDCWD)
    empty, move_flags = ctypes.c_char_p(b""), ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH)
    sources = tuple(ctypes.c_char_p(source.encode()) for source, _, _ in targets)
    places = tuple((index, target.encode(), ctypes.c_char_p(target.encode()), is_dir)
                   for index, (_, target, is_dir) in enumerate(targets))
    trees = (ctypes.c_int * max(1, len(targets)))()
    cwd = ctypes.create_string_buffer(4096)
    exists = errno.EEXIST

    def enter() -> int:
        if unshare(flags) != 0:
            return get_errno() or 1
        for path, data, size in maps:
            fd = open_(path, o_write, 0)
            if fd < 0:
                return get_errno() or 1
            written = write(fd, data, size)
            close(fd)
            if written != size:
                return get_errno() or 1
        if mount(None, root, None, private, None) != 0:
            return get_errno() or 1
        for index, source in enumerate(sources):
            trees[index] = syscall(open_tree, at_cwd, source, clone_flags)  # -1: the root is gone, left out
        for folder in covers:
            if mount(tmpfs, folder, tmpfs, covered, small) != 0:
                return get_errno() or 1
        for folder in points:
            if mkdir(folder, 0o755) != 0 and get_errno() != exists:
                return get_errno() or 1
        for index, target, target_ref, is_dir in places:
            if trees[index] < 0:
                continue
            if is_dir:
                if mkdir(target, 0o755) != 0 and get_errno() != exists:
                    return get_errno() or 1
            else:
                fd = open_(target, o_create, 0o600)
                if fd < 0:
                    return get_errno() or 1
                close(fd)
            moved = syscall(move_mount, trees[index], empty, at_cwd, target_ref, move_flags)
            close(trees[index])
            if moved != 0:
                return get_errno() or 1
        for folder in covers:
            mount(None, folder, None, read_only, None)  # Landlock refuses writing there anyway
        if fresh_shm and mount(tmpfs, shm, tmpfs, covered, shm_options) != 0:
            return get_errno() or 1
        if getcwd(cwd, 4096) is None or chdir(cwd) != 0:
            chdir(root)  # its folder is no root: nothing of the covered tree stays reachable through ".."
        return 0

    enter.fresh_shm = fresh_shm  # type: ignore[attr-defined]  # the launch's own /dev/shm, for Landlock to allow
    return enter


def available() -> bool:
    """Whether this docket process can give its launches a private mount namespace: tried once, in a throwaway
    child (a failure halfway, in a user namespace without its maps, could not be undone in a real launch)."""
    global _available
    if _available is None:
        enter = private_mounts((), probe=True)

        def probe() -> None:
            if enter() != 0:
                raise OSError("no private mount namespace")

        try:
            done = subprocess.run(["/bin/sh", "-c", ":"], preexec_fn=probe, close_fds=True, check=False,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _available = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _available = False
    return _available


# seccomp, for where no namespace can be had: socket(AF_UNIX, ...) refused
_AUDIT_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198), "arm64": (0xC00000B7, 198),
               "riscv64": (0xC00000F3, 198), "ppc64le": (0xC0000015, 326), "s390x": (0x80000016, 359)}
_LD_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_X32 = 0x40000000


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def no_unix_sockets() -> Callable[[], int] | None:
    """The preexec step that installs the fallback filter (after no_new_privs): 0, or the errno it failed with. None
    on an architecture it does not know, where the fallback is refused instead."""
    arch = _AUDIT_ARCH.get(platform.machine())
    if arch is None:
        return None
    audit, socket_nr = arch
    refuse = _SECCOMP_RET_ERRNO | errno.EACCES
    program = (_Filter * 9)(
        _Filter(_LD_ABS, 0, 0, 4),  # arch
        _Filter(_JEQ, 0, 6, audit),  # another (32-bit) arch: refused
        _Filter(_LD_ABS, 0, 0, 0),  # syscall number
        _Filter(_JSET, 4, 0, _X32 if audit == 0xC000003E else 0),  # x32: refused
        _Filter(_JEQ, 0, 2, socket_nr),
        _Filter(_LD_ABS, 0, 0, 16),  # args[0], low word: the domain
        _Filter(_JEQ, 1, 0, 1),  # AF_UNIX
        _Filter(_RET, 0, 0, _SECCOMP_RET_ALLOW),
        _Filter(_RET, 0, 0, refuse),
    )
    if platform.machine() == "s390x":
        program[5] = _Filter(_LD_ABS, 0, 0, 20)  # big-endian: the low word comes second
    fprog = _Program(len(program), ctypes.cast(program, ctypes.POINTER(_Filter)))
    address = ctypes.addressof(fprog)
    prctl, get_errno = _c().prctl, ctypes.get_errno
    keep = (program, fprog)

    def install() -> int:
        if keep and prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, address, 0, 0) != 0:
            return get_errno() or 1
        return 0

    return install
