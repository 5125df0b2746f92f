"""Repositories of their own: where an agent works (a task's workspace) and where a check runs (an execution).

Each is a non-bare repository whose ``.git`` is a folder inside it: its own HEAD, refs, index, config (written
here, nothing copied from the user's) and an empty hooks folder. It borrows the user's objects read-only through
``.git/objects/info/alternates``, as ``git clone --shared`` does, so it is made without copying a single object;
whatever its git commands write (objects, refs, config, hooks) stays inside it. Nothing an agent does there reaches
the user's ``.git``.

Made in-process: files written straight from the user's object store in a hidden staging folder beside the path
(by two threads while a third reads the pack: the system calls release the GIL), the index written from the stat
data each file had when written (nothing is read back), then one rename into place, so it appears whole or not at
all. No filter, hook or attribute of the repository runs: blobs are written as they are stored. The capture's stat
cache (capture.py) is seeded with the same stat data, so the first capture of a workspace hashes only what changed
since.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import stat
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import Refused
from ..faults import crash_point
from .ids import commit_at
from .objects import keep_docket_made
from .repository import read_text
from .blobs import is_too_large_to_read, write_loose_blob
from concurrent.futures import ThreadPoolExecutor
from .stat_cache import seed_stat_cache
import queue
import threading

__all__ = ["OwnRepository", "alternates_of", "borrows_from", "make_git_dir", "make_own_repository",
           "read_own_repository", "require_borrowable", "write_index"]

TREE, FILE, EXECUTABLE, SYMLINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000
CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
          "[gc]\n\tauto = 0\n")  # gc.auto = 0: the agent's git never repacks, so it never tries to prune borrowed objects
_FOLDERS = ("objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags", "hooks", "info")
_EXCLUDE_LIMIT = 1 << 20
_THREADS, _BATCH, _QUEUED = 2, 64, 16  # checkout threads; files per batch; batches waiting (a memory bound)


@dataclass(frozen=True)
class OwnRepository:
    """What is at a path that looks like one of docket's own repositories (never raises to make)."""

    head: str | None  # HEAD's text: "ref: refs/heads/..." or a commit id (None: no readable HEAD)
    alternates: tuple[str, ...]  # the object folders it borrows from, as written


def make_own_repository(common: Path, path: Path, *, head: str, commit: str, branch: str | None,
                        written: list | None = None) -> bool:
    """A repository of its own at path, checked out at commit (HEAD ``ref: refs/heads/<branch>`` at commit, or
    detached at commit), borrowing common's objects; appearing whole or not at all. path's parent must exist.

    False (and nothing left) when something appeared at path meanwhile, or common lacks an object of commit (a
    prune beside docket took it: the caller observes again). dulwich's InvalidPathError for a tree
    naming a path git would refuse to write ('..', '.git', an absolute path), after undoing; OSError for real I/O
    failures, after undoing. written, when given, receives (path, mode, hex sha, stat) of every file written.
    """
    from dulwich.repo import Repo

    staging = path.parent / f".{path.name}.{secrets.token_hex(4)}.partial"
    try:
        os.mkdir(staging, 0o700)
        git = staging / ".git"
        with Repo(str(common)) as user:
            try:
                make_git_dir(common, git, head=head, commit=commit, branch=branch, store=user.object_store)
                stats = _check_out(user.object_store, commit_at(user, commit).tree, staging)
            except KeyError:  # a prune beside docket took an object: nothing is made, observing again says so
                shutil.rmtree(staging, ignore_errors=True)
                return False
        write_index(git / "index", stats)
        _seed_capture_cache(git, stats)
        crash_point("workspace:before-rename")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        os.rename(staging, path)  # appears at its path whole, or not at all
    except OSError as e:
        shutil.rmtree(staging, ignore_errors=True)
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            return False
        raise
    crash_point("workspace:after-rename")
    if written is not None:
        written.extend(stats)
    return True


def require_borrowable(common: Path) -> None:
    """Refused unless a workspace can borrow common's objects: git reads objects/info/alternates one path per
    line, so a repository whose path holds a newline would hand every workspace a path that names nothing
    (its work then read as diverged); say so before a run opens instead."""
    objects = os.path.realpath(common / "objects")
    if "\n" in objects:
        raise Refused(Code.REPOSITORY_PATH_UNSUPPORTED,
                      f"{objects!r} holds a newline: git's alternates cannot name it, so docket cannot make "
                      "workspaces for this repository; move or rename it")


def make_git_dir(common: Path, git: Path, *, head: str, commit: str, branch: str | None, store,  # noqa: ANN001
                 keep: bool = True) -> None:
    """The git dir of a repository of its own at git (made here; its parent must exist), index aside: config, HEAD,
    the alternates naming common's objects, the user's info/exclude, the branch if any, and (keep) the objects
    docket made on the way to commit (objects.keep_docket_made). KeyError when store lacks one of those."""
    os.mkdir(git, 0o700)
    for folder in _FOLDERS:
        os.mkdir(git / folder, 0o700)
    _write_new(git / "config", CONFIG)
    _write_new(git / "HEAD", f"{head}\n")
    require_borrowable(common)
    _write_new(git / "objects" / "info" / "alternates", os.path.realpath(common / "objects") + "\n")
    _write_new(git / "info" / "exclude", _read_exclude(common / "info" / "exclude"))
    if branch is not None:
        ref = git / "refs" / "heads" / branch
        ref.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(ref, f"{commit}\n")
    if keep:
        keep_docket_made(store, git / "objects", commit.encode("ascii"))


def read_own_repository(path: Path) -> OwnRepository | None:
    """HEAD and alternates of the repository whose ``.git`` folder is inside path; None when path/.git is no real
    folder (missing, a file as in a linked worktree, a symlink). Never follows a symlink."""
    git = path / ".git"
    try:
        st = os.lstat(git)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return OwnRepository(read_text(git / "HEAD"), alternates_of(git))


def alternates_of(git_dir: Path) -> tuple[str, ...]:
    """The object folders a git dir borrows from (its objects/info/alternates), as written; () when none."""
    text = read_text(git_dir / "objects" / "info" / "alternates")
    return tuple(line for line in (text or "").splitlines() if line and not line.startswith("#"))


def borrows_from(own: OwnRepository, common: Path) -> bool:
    """Whether own borrows exactly common's objects (and nothing else)."""
    return len(own.alternates) == 1 and os.path.realpath(own.alternates[0]) == os.path.realpath(common / "objects")


# Checkout ----------------------------------------------------------------------------------------------------------


def _check_out(store, tree_id: bytes, root: Path) -> list[tuple[bytes, int, bytes, os.stat_result]]:  # noqa: ANN001
    """Every entry of the tree written under root (folders made 0777 & ~umask, as git does); (path, mode, hex sha,
    stat) per file, symlink and gitlink, in index order.

    The folders first, from the trees (read raw), each depth's split among threads; then the blobs in the order
    the object store holds them (a pack read front to back, each delta base at hand), each written to every path
    that names it by one of two threads while this one reads on.
    """
    out: list[tuple[bytes, int, bytes, os.stat_result]] = []
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)  # paths looked up from here
    try:
        _write_tree(store, tree_id, top, out)
    finally:
        os.close(top)
    out.sort(key=lambda entry: entry[0])
    return out


def _write_tree(store, tree_id: bytes, top: int, out: list) -> None:  # noqa: ANN001
    from dulwich.index import InvalidPathError, validate_path_element_default
    from dulwich.objects import parse_tree

    wanted: dict[bytes, list[tuple[bytes, int]]] = {}  # blob id -> (path, mode) of each file or symlink naming it
    levels: list[list[bytes]] = []  # the folders (and gitlinks) to make, by depth: each level's parents made before
    gitlinks: list[tuple[bytes, bytes]] = []
    pending = [(b"", tree_id, 0)]
    while pending:
        prefix, sha, depth = pending.pop()
        for name, mode, child in parse_tree(store.get_raw(sha)[1], 20):
            if not validate_path_element_default(name) or name.lower() == b".git":
                raise InvalidPathError(prefix + name)
            rel = prefix + name
            if mode == TREE or mode == GITLINK:
                if len(levels) == depth:
                    levels.append([])
                levels[depth].append(rel)
                if mode == TREE:
                    pending.append((rel + b"/", child, depth + 1))
                else:
                    gitlinks.append((rel, child))
            else:
                kind = SYMLINK if stat.S_ISLNK(mode) else EXECUTABLE if mode & 0o100 else FILE
                wanted.setdefault(child, []).append((rel, kind))
    _make_folders(levels, top)
    out.extend((rel, GITLINK, child, os.stat(rel, dir_fd=top, follow_symlinks=False)) for rel, child in gitlinks)
    written: set[bytes] = set()
    with _Writers(top, out) as writers:
        batch: list[tuple[bytes, int, bytes, bytes]] = []
        try:
            for blob in store.iterobjects_subset(list(wanted)):
                data, sha = blob.as_raw_string(), blob.id
                batch.extend((rel, kind, sha, data) for rel, kind in wanted[sha])
                written.add(sha)
                if len(batch) >= _BATCH:
                    writers.put(batch)
                    batch = []
        except zlib.error as e:  # a blob dulwich will not hold in memory: the rest one by one
            from .blobs import is_too_large_to_read

            if not is_too_large_to_read(e):
                raise
            writers.put(batch)
            batch = []
            for sha in wanted:
                if sha not in written:
                    _write_one(store, sha, wanted[sha], top, out, writers)
        writers.put(batch)


def _write_one(store, sha: bytes, places: list[tuple[bytes, int]], top: int, out: list,  # noqa: ANN001
               writers: _Writers) -> None:
    """One blob written to every path that names it: through the writers when dulwich reads it, else inflated
    a chunk at a time (blobs.write_loose_blob) here, straight to each file."""

    try:
        data = store[sha].as_raw_string()
    except zlib.error as e:
        if not is_too_large_to_read(e):
            raise
    else:
        writers.put([(rel, kind, sha, data) for rel, kind in places])
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for rel, kind in places:
        if kind == SYMLINK:
            raise ValueError(f"the symlink {rel!r} names a target too large to read")
        fd = os.open(rel, flags, 0o777 if kind == EXECUTABLE else 0o666, dir_fd=top)
        try:
            write_loose_blob(store, sha, fd)
            out.append((rel, kind, sha, os.fstat(fd)))
        finally:
            os.close(fd)


def _make_folders(levels: list[list[bytes]], top: int) -> None:
    """Every folder made, one depth after another, each depth's folders split among threads (``mkdir`` releases the
    GIL). The first error met is raised once every thread has stopped."""
    def make(rels: list[bytes]) -> None:
        for rel in rels:
            os.mkdir(rel, dir_fd=top)

    if sum(len(level) for level in levels) < _BATCH:
        for level in levels:
            make(level)
        return

    with ThreadPoolExecutor(_THREADS, thread_name_prefix="docket-folders") as pool:
        for level in levels:
            chunks = [level[i::_THREADS + 1] for i in range(_THREADS + 1)]  # the last one made here
            futures = [pool.submit(make, chunk) for chunk in chunks[:-1]]
            try:
                make(chunks[-1])
            finally:
                for future in futures:
                    future.exception()  # each thread done before anything else happens (or is undone)
            for future in futures:
                future.result()


class _Writers:
    """Threads writing the files while the object store is read: the system calls (``open``, ``write``,
    ``fstat``) release the GIL, so the writes of two threads and the reading of the pack overlap. Every thread
    appends (path, mode, hex sha, stat) to out; leaving the ``with`` waits for all of them and raises the first
    error any met (after which the others stop writing)."""

    def __init__(self, top: int, out: list) -> None:
        self.top, self.out = top, out
        self.queue: queue.Queue = queue.Queue(maxsize=_QUEUED)
        self.errors: list[BaseException] = []
        self.threads: list = []

    def __enter__(self) -> "_Writers":
        self.threads = [threading.Thread(target=self._run, name=f"docket-checkout-{i}", daemon=True)
                        for i in range(_THREADS)]
        for thread in self.threads:
            thread.start()
        return self

    def put(self, batch: list[tuple[bytes, int, bytes, bytes]]) -> None:
        if self.errors:
            raise self.errors[0]
        if batch:
            self.queue.put(batch)

    def __exit__(self, kind, error, trace) -> None:  # noqa: ANN001
        if error is not None:
            self.errors.append(error)  # the reader failed: the writers stop writing
        for _ in self.threads:
            self.queue.put(None)
        for thread in self.threads:
            thread.join()
        if error is None and self.errors:
            raise self.errors[0]

    def _run(self) -> None:
        top, out, errors, get = self.top, self.out, self.errors, self.queue.get
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        open_, write, fstat, close, lstat = os.open, os.write, os.fstat, os.close, os.stat
        while (batch := get()) is not None:
            if errors:
                continue  # drained, not written: the checkout is being undone
            try:
                for rel, kind, sha, data in batch:
                    if kind == SYMLINK:
                        os.symlink(data, rel, dir_fd=top)
                        out.append((rel, kind, sha, lstat(rel, dir_fd=top, follow_symlinks=False)))
                        continue
                    fd = open_(rel, flags, 0o777 if kind == EXECUTABLE else 0o666, dir_fd=top)
                    try:
                        view = memoryview(data)
                        while view:
                            view = view[write(fd, view):]
                        out.append((rel, kind, sha, fstat(fd)))
                    finally:
                        close(fd)
            except BaseException as e:  # noqa: BLE001  (raised again by __exit__ or the next put)
                errors.append(e)


def write_index(path: Path, entries: list[tuple[bytes, int, bytes, os.stat_result]]) -> None:
    """A version 2 index of entries, each with the stat data its file had when written."""
    parts = [b"DIRC", struct.pack(">LL", 2, len(entries))]
    mask = 0xFFFFFFFF
    for name, mode, sha, st in entries:
        size = 0 if mode == GITLINK else st.st_size
        head = struct.pack(">LLLLLLLLLL", (st.st_ctime_ns // 1_000_000_000) & mask, st.st_ctime_ns % 1_000_000_000,
                           (st.st_mtime_ns // 1_000_000_000) & mask, st.st_mtime_ns % 1_000_000_000,
                           st.st_dev & mask, st.st_ino & mask, mode, st.st_uid & mask, st.st_gid & mask, size & mask)
        entry = head + bytes.fromhex(sha.decode("ascii")) + struct.pack(">H", min(len(name), 0xFFF)) + name
        parts.append(entry + b"\0" * (8 - len(entry) % 8))
    body = b"".join(parts)
    _write_new_bytes(path, body + hashlib.sha1(body).digest())


def _seed_capture_cache(git: Path, entries: list[tuple[bytes, int, bytes, os.stat_result]]) -> None:
    seed_stat_cache(git, {name: (mode, sha, st) for name, mode, sha, st in entries if mode != GITLINK})


# Small files -------------------------------------------------------------------------------------------------------


def _read_exclude(path: Path) -> str:
    """The user's info/exclude (ignore rules only), so a workspace ignores what the user's checkout ignores."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, _EXCLUDE_LIMIT).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _write_new(path: Path, text: str) -> None:
    _write_new_bytes(path, text.encode("utf-8"))


def _write_new_bytes(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
