"""Safe filesystem operations: docket's files are opened as what they claim to be.

The ledger and views are created create-only at 0600 without following
symlinks; an existing one is checked on the opened descriptor (regular file,
the SQLite header), so a symlink, a device, a FIFO or somebody's notes are
refused before SQLite writes a byte, and docket never changes the mode of a
file it did not create.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
from pathlib import Path

from ....domain.kernel.errors import BadInput, Refused, VerificationFailed
from ..ledger.ledger_rows import LEDGER_TABLES, connect_read_only
from ....domain.kernel.codes import Code
from .paths import data_dir

__all__ = ["SQLITE_HEADER", "check_ledger_file", "create_private_file", "exposure_warnings", "own_data_folder",
           "own_folder", "prepare_ledger_file", "read_named_file", "unsafe_folder"]

SQLITE_HEADER = b"SQLite format 3\x00"

_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: opening a FIFO must not hang
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def read_named_file(name: str | Path, limit: int, *, code: str, missing: Exception | None = None,
                    too_large: Exception | None = None) -> bytes:
    """The bytes of a file a user names (an anchor, a tasks or prompt file): opened non-blocking, so a FIFO never
    hangs, refused unless it is a regular file (a device such as /dev/zero is not), at most limit bytes read.

    BadInput ``code`` for anything that cannot be read as such; missing (when given) for a file that is not there,
    too_large (when given) for one over limit.
    A symlink is followed: the user named it.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if missing is not None:
            raise missing from None
        raise BadInput(code, f"cannot read {name}: no such file") from None
    except OSError as e:
        raise BadInput(code, f"cannot read {name}: {e.strerror}") from None
    except ValueError:  # a NUL in the name
        raise BadInput(code, f"{name!r} is not a file name") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInput(code, f"{name} is not a regular file")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(limit + 1 - size, 1 << 20))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise BadInput(code, f"cannot read {name}: {e.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise too_large or BadInput(code, f"{name} holds more than {limit} bytes")
    return data


def own_folder(root: Path, folder: Path) -> Path:
    """folder (root or inside it), each folder below root made 0700 where missing and opened without following a
    symlink: the one way docket makes a folder it writes into under its own root (``<git dir>/docket``, the data
    folder). root itself is the user's choice and is made as it is.

    Refused ``unsafe-path`` when a folder on the way is a symlink or not a folder: nothing is made through it, and
    `docket reconcile --apply` moves it aside (adapters/world/files/planted.py).
    """
    root, folder = Path(root), Path(folder)
    parts = folder.relative_to(root).parts
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                os.mkdir(part, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                child = os.open(part, _FOLDER, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise unsafe_folder(root.joinpath(*parts[: i + 1])) from None
                raise
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return folder


def own_data_folder(folder: Path, root: Path | None = None) -> Path:
    """own_folder under root ([workspace] root), else under docket's data folder."""

    return own_folder(root or data_dir(), folder)


def unsafe_folder(path: Path) -> Refused:
    """The refusal of a folder docket would write into that is a symlink or not a folder."""
    try:
        what = f"a symlink to {os.readlink(path)}"
    except OSError:  # not a symlink (or gone meanwhile)
        what = "not a folder"

    return Refused(Code.UNSAFE_PATH, f"{path} is {what}; docket never writes through it: run 'docket reconcile "
                                     "--apply' to move it aside, then resume")


def create_private_file(path: Path) -> bool:
    """Create path (and its folder) readable by its owner only; True if created now.

    An existing path must be a regular file, not a symlink; it is left as it is.
    """
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
    except FileExistsError:
        _check_header_of(path, header=None)
        return False
    try:
        os.fchmod(fd, 0o600)  # the umask may have narrowed or the creation mode; be exact
    finally:
        os.close(fd)
    return True


def prepare_ledger_file(path: Path) -> bool:
    """create_private_file for the ledger, refusing a file that is not (yet) a docket ledger.

    An existing file must be empty, or an SQLite database that holds docket's
    tables or no table at all (another `docket init` may be creating them).
    """
    if create_private_file(path):
        return True
    check_ledger_file(path)
    return False


def check_ledger_file(path: Path) -> bool:
    """Refuse a symlink, a non-regular file, or a non-empty file that is not a docket ledger.

    True if the file holds docket's tables; False if it is empty or an SQLite
    database without any table yet (a concurrent init may be creating them).
    A ledger missing some (not all) of docket's tables was damaged: that is a
    verification failure naming them.
    """
    if not _check_header_of(path, header=SQLITE_HEADER):
        return False  # empty: not a ledger yet
    tables = _tables(path)
    found = [name for name in LEDGER_TABLES if name in tables]
    if not found:
        if tables:
            raise BadInput(Code.NOT_A_LEDGER, f"{path} is an SQLite database but not a docket ledger; refusing to touch it")
        return False
    missing = [name for name in LEDGER_TABLES if name not in tables]
    if missing:
        raise VerificationFailed(
            Code.LEDGER_UNVERIFIABLE,
            f"the ledger {path} has no {', '.join(missing)} table: it was damaged and cannot be verified",
        )
    return True


def exposure_warnings(path: Path) -> list[tuple[str, str]]:
    """(code, message) for a ledger others could read or replace; nothing is changed."""
    warnings = []
    try:
        st = os.lstat(path)
        folder = os.stat(path.parent)
    except OSError:
        return []
    if st.st_uid != os.geteuid():
        warnings.append(("ledger-not-owned", f"{path} belongs to user id {st.st_uid}, not to you"))
    if stat.S_IMODE(st.st_mode) & 0o077:
        warnings.append(("ledger-exposed", f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; "
                                           f"others can read it (chmod 600 {path})"))
    if folder.st_mode & 0o022 and not folder.st_mode & stat.S_ISVTX:
        warnings.append(("ledger-folder-exposed", f"{path.parent} is writable by others, who could replace "
                                                  "the ledger; use a private folder"))
    return warnings


# One descriptor of each file this process checked, by (device, inode), kept open for the process's life and never
# closed: closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's included, and
# another process then takes the database for unused, folds its write-ahead log into the file and deletes it under
# this process's open connections, with every commit they make from then on (tests/integration/test_posix_locks.py).
# Opened close-on-exec: no agent, check or hook inherits one.
_KEPT: dict[tuple[int, int], int] = {}
_KEPT_LOCK = threading.Lock()  # docket go checks files from several threads


def _check_header_of(path: Path, *, header: bytes | None) -> bool:
    """Check path is a regular file, without following a symlink, on a descriptor kept open (see _KEPT).

    With a header: True if the file starts with it, False if the file is empty,
    and not-a-ledger otherwise.
    """
    with _KEPT_LOCK:
        fd = _kept_descriptor(path)
        start = os.pread(fd, len(header), 0) if header is not None else None
    if header is None:
        return True
    if not start:
        return False
    if start != header:
        raise BadInput(Code.NOT_A_LEDGER, f"{path} is not an SQLite database, so not a docket ledger; refusing to touch it")
    return True


def _kept_descriptor(path: Path) -> int:
    try:
        seen = os.lstat(path)
    except OSError:
        seen = None
    if seen is not None and stat.S_ISREG(seen.st_mode) and (kept := _KEPT.get((seen.st_dev, seen.st_ino))) is not None:
        return kept
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    except OSError as e:
        if os.path.islink(path):
            raise BadInput(Code.SYMLINK_REFUSED, f"{path} is a symbolic link; docket opens only its own files") from None
        raise BadInput(Code.UNREADABLE_FILE, f"cannot open {path}: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)  # a device or a FIFO: no database this process holds locks on
        raise BadInput(Code.NOT_A_REGULAR_FILE, f"{path} is not a regular file; docket keeps its ledger in one")
    # replaced between the lstat and the open by a file already kept: this descriptor stays open too
    return _KEPT.setdefault((st.st_dev, st.st_ino), fd)


def _tables(path: Path) -> set[str]:
    conn = connect_read_only(path, timeout=60)
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise BadInput(Code.NOT_A_LEDGER, f"{path} is not a readable SQLite database ({e})") from None
    finally:
        conn.close()
