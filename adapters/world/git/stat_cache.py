"""The capture's private stat cache: path -> the stat fields, git mode and blob id it had when last hashed, so an
unchanged file is not read again (capture.py); seeded when a workspace is written (own_repositories.py)."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

__all__ = ["CACHE_NAME", "StatCache", "seed_stat_cache"]

CACHE_NAME = "docket-capture.index"
_CACHE_MAGIC = b"docket-capture-cache 1\n"


def seed_stat_cache(git_dir: Path, written: dict[bytes, tuple[int, bytes, os.stat_result]]) -> None:
    """The stat cache of a checkout just written (path -> (git mode, blob id, its stat when written)), so that its
    first capture hashes only what changed since (own_repositories.py)."""
    StatCache(git_dir / CACHE_NAME).save({
        path: b"%d %d %d %d %d %d %s" % (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode, mode, sha)
        for path, (mode, sha, st) in written.items()})


class StatCache:
    """path -> the stat fields, git mode and blob id it had when last hashed; a damaged or missing cache is empty.

    File: a magic line, then per path ``mtime_ns ctime_ns size ino st_mode gitmode sha\0path\0``,
    then the sha256 of all that. Written whole to a fresh file, then renamed over.
    """

    def __init__(self, path: Path | None) -> None:
        """The cache at path; None: an empty one, not to be saved."""
        self.path = path
        self.records: dict[bytes, bytes] = {}
        self.written_ns = 0
        if path is None:
            return
        try:
            with open(path, "rb") as f:
                data = f.read()
                self.written_ns = os.fstat(f.fileno()).st_mtime_ns
        except OSError:
            return
        body, digest = data[:-32], data[-32:]
        if body.startswith(_CACHE_MAGIC) and hashlib.sha256(body).digest() == digest:
            parts = body[len(_CACHE_MAGIC):].split(b"\0")
            self.records = dict(zip(parts[1::2], parts[0:-1:2]))

    def save(self, records: dict[bytes, bytes]) -> None:
        assert self.path is not None, "an empty cache is not saved"
        body = b"".join([_CACHE_MAGIC, *(b"%s\0%s\0" % (record, path) for path, record in records.items())])
        draft = self.path.with_name(f"{self.path.name}.{secrets.token_hex(4)}.draft")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(body + hashlib.sha256(body).digest())
        finally:
            os.close(fd)
        try:
            os.replace(draft, self.path)
        except BaseException:
            os.unlink(draft)
            raise
