"""Which repository a ledger belongs to.

At `docket init` a repository gets a random identity, kept in
``<git common dir>/docket/repository-id`` (made create-only, so concurrent
inits agree on one), and the ledger's LedgerCreated event records it. A ledger
is only used against the repository whose identity it records: a ledger copied
into another repository, or pointed at another repository's path, is refused.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from ....domain.kernel.errors import BadInput
from ....domain.kernel.codes import Code

__all__ = ["ID_FILE", "adopt_identity", "ensure_identity", "identity_mismatch", "mismatch_reason", "read_identity"]

ID_FILE = Path("docket") / "repository-id"
_FORMAT = re.compile(r"repo-[0-9a-f]{32}")


def read_identity(common_dir: Path) -> str | None:
    """The repository's docket identity, or None if it has none (or an unreadable one)."""
    try:  # not blocking on a FIFO planted there; a folder or anything but a file is no identity
        fd = os.open(common_dir / ID_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 64).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return text if _FORMAT.fullmatch(text) else None


def ensure_identity(common_dir: Path) -> str:
    """The repository's identity, made now if it has none (create-only: one wins a race)."""
    return adopt_identity(common_dir, None)


def adopt_identity(common_dir: Path, given: str | None) -> str:
    """The repository's identity: the one it has, else given (a shared ledger's, as a clone joins it), else a new
    one, written create-only (one wins a race). A clone that has another identity keeps it."""
    existing = read_identity(common_dir)
    if existing:
        return existing
    if given is not None and not _FORMAT.fullmatch(given):
        raise BadInput(Code.BAD_REPOSITORY_ID, f"{given!r} is not a docket repository id")
    path = common_dir / ID_FILE
    path.parent.mkdir(mode=0o700, exist_ok=True)
    identity = given or "repo-" + secrets.token_hex(16)
    draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, (identity + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(draft, path)  # create-only, and whole: a racing init reads the winner's id, never half of it
    except FileExistsError:
        identity = read_identity(common_dir) or ""
        if not identity:
            raise BadInput(Code.BAD_REPOSITORY_ID, f"{path} exists but does not hold a docket repository id") from None
    finally:
        os.unlink(draft)
    return identity


def identity_mismatch(common_dir: Path, expected: str | None) -> str | None:
    """Why the repository at common_dir is not the one a ledger bound to expected belongs to (None: it is)."""
    if expected is None:
        return None  # a ledger bound to no repository (made before identities, or outside a repository)
    return mismatch_reason(common_dir, expected, read_identity(common_dir))


def mismatch_reason(common_dir: Path, expected: str, found: str | None) -> str | None:
    """Why a repository whose identity is found is not the expected one (None: it is)."""
    if found == expected:
        return None
    has = f"has identity {found}" if found else "has no docket identity"
    return f"this ledger belongs to repository {expected}, but {common_dir} {has}"
