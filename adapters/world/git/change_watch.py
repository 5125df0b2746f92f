"""What changed in a task's workspace since docket made it, known without walking it: an inotify watch (Linux).

Started in the process that makes the workspace, right after it is made and before any agent runs in it
(worktrees.create_worktree), on every folder of it (entries created, deleted, moved in or out, their attributes)
and on every file's own inode (written, truncated, its attributes or link count changed: a write through a hard
link made from outside the workspace still reports, as does one through a shared mapping, when its last writable
descriptor closes). A capture (capture.py) then looks only at the paths reported since, and walks whole every
folder created or moved in since (no watch is added in it: one added late could miss what was put there first).

Anything in doubt falls back to the full walk, for good: the kernel's event queue overflowed, a watch could not be
added, the workspace's own folder moved, was removed or changed, its HEAD is not the commit it was made at (what is
tracked, and so what a walk keeps, changed), or this process did not make the workspace (a restart after a crash:
watches live and die with the process that holds them). What was reported stays reported: every later capture
looks at it again, so a file touched back to its old mtime, or changed and changed back, is read again.

The watch's descriptor is docket's own (close-on-exec, never inherited by an agent). At most KEPT workspaces are
watched per process (the oldest is dropped, and falls back), and none whose folders and files exceed a share of
the user's inotify watches (max_user_watches / SHARE), so parallel tasks leave watches for one another.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from .ids import commit_at

__all__ = ["KEPT", "SHARE", "Watch", "forget_watches", "start_watch", "watch_of", "watch_workspace"]

KEPT = 32  # workspaces watched at once in one process
SHARE = 8  # one workspace uses at most this share of the user's inotify watches

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_ISDIR = 0x1000000, 0x2000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC

_FOLDER_EVENTS = (IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
                  IN_ONLYDIR | IN_DONT_FOLLOW)
_FILE_EVENTS = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW
_HEADER = struct.Struct("iIII")
_TREE, _SYMLINK, _GITLINK = 0o040000, 0o120000, 0o160000

_WATCHES: dict[str, Watch] = {}
_LOCK = threading.Lock()
_LIBC = None


class Watch:
    """One workspace's watch: the paths reported since it began (dirty), the folders to walk whole (rewalk), and
    why it cannot be trusted any more (broken: None while it can). Thread-safe."""

    def __init__(self, root: bytes, commit: str, fd: int, root_id: tuple[int, int]) -> None:
        self.root, self.commit, self.fd, self.root_id = root, commit, fd, root_id
        self.paths: dict[int, tuple[bytes, bool]] = {}  # watch descriptor -> (path, a folder)
        self.dirty: set[bytes] = set()
        self.rewalk: set[bytes] = set()
        self.unwatched: set[bytes] = set()  # paths made anew since (no watch of their own: a write through a hard
        # link from outside to one of them is not reported, so a capture of them is never taken as stable on trust)
        self.broken: str | None = None
        self.events = 0  # events read so far: unchanged between two reads means nothing was reported between
        self.fast_captures = 0  # captures that used it (for tests and benchmarks)
        self._lock = threading.Lock()

    def changes(self, head: str) -> tuple[frozenset[bytes], frozenset[bytes]] | None:
        """(dirty paths, folders to walk whole) since the workspace was made at self.commit; None when the watch
        cannot say (broken, the workspace's folder replaced, or HEAD no longer that commit): walk it all."""
        with self._lock:
            self._read()
            if self.broken is None and head != self.commit:
                self.broken = f"HEAD moved from {self.commit} to {head}"
            if self.broken is None and _identity(self.root) != self.root_id:
                self._break("the workspace's folder was replaced")
            if self.broken is not None:
                return None
            return frozenset(self.dirty), frozenset(self.rewalk)

    def mark(self) -> int | None:
        """The count of events read so far (all pending read first); None once broken."""
        with self._lock:
            self._read()
            return None if self.broken is not None else self.events

    def settled_since(self, mark: int, head: str) -> bool:
        """Whether nothing was reported since mark and every path reported before is one the watch still sees change
        from anywhere (a file of the workspace as made, written in place; no folder to walk whole, no path made
        anew): then nothing a capture begun after mark looked at can have changed since."""
        return self.changes(head) is not None and self.events == mark and not self.rewalk and not self.unwatched

    def watch_new_files(self) -> None:
        """Give each file made anew since (one reported as created or moved in) a watch of its own, so that from now
        on a write to it from anywhere is reported; a capture calls this before it reads them. What cannot be
        watched stays unwatched (its captures are then not taken as stable on trust)."""
        with self._lock:
            libc = _libc()
            for rel in sorted(self.unwatched):
                path = self.root + b"/" + rel
                try:
                    st = os.lstat(path)
                except OSError:
                    self.unwatched.discard(rel)  # gone: made again, it is reported again
                    continue
                if stat.S_ISLNK(st.st_mode):
                    self.unwatched.discard(rel)  # a symlink is never changed in place: replacing it is reported
                elif stat.S_ISREG(st.st_mode) and self.fd >= 0 and libc is not None:
                    wd = libc.inotify_add_watch(self.fd, path, _FILE_EVENTS)
                    if wd >= 0:
                        self.paths[wd] = (rel, False)
                        self.unwatched.discard(rel)

    def close(self) -> None:
        with self._lock:
            self._break("closed")

    def _break(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.paths.clear()

    def _read(self) -> None:
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError as e:
                self._break(f"reading the watch failed: {e}")
                return
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                name = data[offset + 16:offset + 16 + size].rstrip(b"\0")
                offset += 16 + size
                self.events += 1
                self._event(wd, mask, name)

    def _event(self, wd: int, mask: int, name: bytes) -> None:
        if mask & IN_Q_OVERFLOW:
            self._break("the event queue overflowed")
            return
        known = self.paths.get(wd)
        if known is None:
            return  # a watch already gone (IN_IGNORED came first): what removed it was reported then
        path, folder = known
        if not folder:  # a file's own inode: whatever happened, look at it again
            self.dirty.add(path)
            return
        if not name:  # the folder itself: moved, deleted, its attributes changed
            if not path:
                self._break("the workspace's folder itself changed")
            else:
                self.rewalk.add(path)
            if mask & IN_IGNORED:
                self.paths.pop(wd, None)
            return
        child = path + b"/" + name if path else name
        if not path and name == b".git":
            return  # the workspace's own git folder: the walk never enters it either
        if name.lower() == b".git" and path:
            self.rewalk.add(path)  # a folder that now holds a repository: walked whole, as the walk skips it whole
        elif mask & IN_ISDIR:
            self.rewalk.add(child)
        else:
            self.dirty.add(child)
            if mask & (IN_CREATE | IN_MOVED_TO):
                self.unwatched.add(child)


def watch_workspace(path: Path, commit: str) -> None:
    """Watch the workspace just made at path, checked out at commit (a no-op where inotify is missing, and whenever
    anything fails: its captures then walk it whole). Never raises."""
    if not sys.platform.startswith("linux"):
        return
    try:
        from .flat_trees import flattened
        from .repository import open_repo

        with open_repo(Path(path)) as repo:
            tracked, folders, _trees = flattened(repo.object_store, commit_at(repo, commit).tree)
        start_watch(Path(path), commit, folders, tracked.items())
    except Exception:  # noqa: BLE001  an optimisation that failed: the capture walks as before
        forget_watches([Path(path)])


def start_watch(root: Path, commit: str, folders: Iterable[bytes], entries: Iterable[tuple[bytes, tuple[int, bytes]]],
                *, limit: int | None = None) -> Watch | None:
    """Watch root (made at commit: folders and entries are that commit's tree, flattened) and keep it for
    watch_of; None (and no watch kept) when inotify, a watch or the share of watches (limit, else
    max_user_watches / SHARE) is not to be had. Raises nothing but MemoryError and the like."""
    libc = _libc()
    if libc is None:
        return None
    key = os.path.realpath(root)
    forget_watches([root])
    _drop_broken()
    folders = [b"", *folders]
    files = [p for p, (mode, _sha) in entries if mode not in (_SYMLINK, _GITLINK, _TREE)]
    if len(folders) + len(files) > (_user_share() if limit is None else limit):
        return None
    fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None
    base = os.fsencode(key)
    try:
        watch = Watch(base, commit, fd, _identity(base))
    except OSError:
        os.close(fd)
        return None
    add = libc.inotify_add_watch
    for paths, mask, folder in ((folders, _FOLDER_EVENTS, True), (files, _FILE_EVENTS, False)):
        for rel in paths:
            wd = add(fd, base + b"/" + rel if rel else base, mask)
            if wd < 0:
                watch.close()
                return None
            watch.paths[wd] = (rel, folder)
    with _LOCK:
        _WATCHES[key] = watch
        while len(_WATCHES) > KEPT:
            _WATCHES.pop(next(iter(_WATCHES))).close()
    return watch


def watch_of(root: Path) -> Watch | None:
    """The watch kept for the workspace at root in this process, if any and not broken."""
    watch = _WATCHES.get(os.path.realpath(root))
    return watch if watch is not None and watch.broken is None else None


def forget_watches(roots: Iterable[Path] | None = None) -> None:
    """Stop watching roots (all when None)."""
    with _LOCK:
        keys = list(_WATCHES) if roots is None else [os.path.realpath(r) for r in roots]
        for key in keys:
            watch = _WATCHES.pop(key, None)
            if watch is not None:
                watch.close()


def _drop_broken() -> None:
    """Read what every kept watch has pending (a workspace removed breaks its watch, which closes it) and drop the
    broken ones, so that finished workspaces give their watches back."""
    with _LOCK:
        watches = list(_WATCHES.items())
    for key, watch in watches:
        if watch.mark() is None:
            with _LOCK:
                if _WATCHES.get(key) is watch:
                    del _WATCHES[key]


def _identity(root: bytes) -> tuple[int, int]:
    try:
        st = os.lstat(root)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


def _user_share() -> int:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", "rb") as f:
            return int(f.read()) // SHARE
    except (OSError, ValueError):
        return 8192 // SHARE


def _libc():  # noqa: ANN202
    global _LIBC
    if _LIBC is None:
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.inotify_init1.argtypes = [ctypes.c_int]
            libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        except (OSError, AttributeError):
            libc = False
        _LIBC = libc
    return _LIBC or None
