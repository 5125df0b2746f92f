"""Every process a launch starts stays known: docket is a child subreaper, and so is each process it launches.

Linux gives an orphan to its nearest living ancestor that is a subreaper
(``PR_SET_CHILD_SUBREAPER``), else to init. Each launched process (an agent, a
check, a hook) is made a subreaper before it execs (landlock.py), so while it
lives every descendant it starts, however it detaches (``setsid``, a double
fork, a cleared environment), stays in its subtree; once it has ended, what it
left is adopted by docket, which ``become_subreaper`` made a subreaper too.
``stop_orphans`` then kills (SIGKILL) and reaps every process docket adopted,
until none is left: a launch is judged only once its whole tree is gone.

docket must never reap a child that ``subprocess.Popen`` manages (Popen would
see ECHILD and report exit status 0). So an adopted process is one whose parent
is this process, whose process group is not this process's own (docket's own
helpers, the git CLI and the ledger's verifying forks stay in it) and whose pid
is not among those docket started in a session of their own (``started`` names
them, under the same lock the orphan scan takes, so a launch between its fork
and its registration is never taken for an orphan).

A fork bomb is bounded by the launch's pids cgroup, where one can be made
(pids_limit.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["adopted_by_init_in", "become_subreaper", "is_subreaper", "orphans", "started", "stop_orphans"]

_PR_SET_CHILD_SUBREAPER = 36
_LINUX = sys.platform.startswith("linux")
_lock = threading.RLock()
_own: set[int] = set()
_subreaper = False


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); whether it is one."""
    global _subreaper
    if _LINUX and not _subreaper:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


def is_subreaper() -> bool:
    return _subreaper


@contextmanager
def started() -> Iterator[set[int]]:
    """Hold off the orphan scan while a child is started; add its pid to the set yielded (docket's own)."""
    with _lock:
        yield _own


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, pgid) of pid, or None if it is gone."""
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[1]), int(fields[2])


def _all() -> dict[int, tuple[int, int]]:
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (seen := _stat(int(entry.name))) is not None:
            table[int(entry.name)] = seen
    return table


def orphans() -> list[int]:
    """The processes this one adopted (see the module's docstring), and all their descendants."""
    if not _LINUX:
        return []
    me, my_group = os.getpid(), os.getpgrp()
    table = _all()
    _own.intersection_update(pid for pid, (ppid, _) in table.items() if ppid == me)
    found = [pid for pid, (ppid, pgid) in table.items() if ppid == me and pgid != my_group and pid not in _own]
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tree, queue = [], list(found)
    while queue:
        pid = queue.pop()
        tree.append(pid)
        queue.extend(children.get(pid, ()))
    return tree


def stop_orphans(wait: float = 10.0) -> bool:
    """Kill and reap every process this one adopted, until none is left; whether none is (False after wait)."""
    if not _subreaper:
        return True
    deadline = time.monotonic() + wait
    while True:
        with _lock:
            tree = orphans()
            me = os.getpid()
            for pid in tree:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            for pid in tree:
                if (seen := _stat(pid)) is not None and seen[0] == me:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
        if not tree:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def _session(pid: int) -> int | None:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[3])  # state, ppid, pgrp, session


def _left_its_session(pid: int, ppid: int) -> bool:
    """Whether pid is a daemon some other subreaper adopted (a supervisor, a container's init, a test runner): it is
    in another session than its parent, and that session's leader is gone (it called setsid, then its leader
    exited). A child of a user's shell shares the shell's session."""
    session, parents = _session(pid), _session(ppid)
    if session is None or parents is None or session == parents:
        return False
    return session != pid and _session(session) is None


def adopted_by_init_in(folders: list[Path]) -> list[int]:
    """Processes of this user adopted by init (or a systemd user manager) whose working directory lies in one of
    folders: what a launch there left when the docket that supervised it died (a daemon that cleared its
    environment carries no DOCKET_* mark). A process with a living parent (a user's shell cd'ed into a worktree,
    another docket's launch) is never one."""
    import psutil

    uid, found = os.getuid(), []
    roots = [str(folder) for folder in folders]
    for process in psutil.process_iter():  # not process_iter(attrs): its `info` is shared with other threads' scans
        try:
            info = process.as_dict(["uids", "ppid"])
            if info["uids"] is None or info["uids"].real != uid or process.pid == os.getpid():
                continue
            ppid = info["ppid"]
            if ppid != 1 and not (ppid and psutil.Process(ppid).name() == "systemd") and not _left_its_session(
                    process.pid, ppid):
                continue
            cwd = process.cwd()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
        if any(cwd == root or cwd.startswith(root + "/") for root in roots):
            found.append(process.pid)
    return found
