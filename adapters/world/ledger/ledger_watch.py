"""What the long-lived `docket go` process knows of its ledger, checked before it delivers or seals.

Without a sandbox an agent runs as the user and can open the ledger file: delete it, put another repository's
ledger in its place, or edit an event and recompute the chain with the documented formula (DESIGN.md, "The
ledger"). `docket verify` afterwards would find a consistent chain. The process that wrote the ledger knows more:
the file's device and inode, and the digest of the last event it appended itself. Before the target moves and
before the receipt is sealed, ``LedgerWatch.check`` makes sure that

- the file is still at its path, the same file (device and inode) docket opened;
- the last head it verified, and the head each of its own writes since left, still have the digests docket
  computed: an edit of an event, with the chain recomputed from there, changes the digest of every later
  position, so of the last write docket made before the edit (docket's later writes chain on from the forgery,
  which is why one head is not enough);
- every event after the last verified head chains on from it (verified incrementally, not from the genesis).

An event edited below the last verified head without recomputing the chain leaves every digest as it was: that
is a broken chain, which `docket verify` reports, and a receipt citing the event no longer verifies.

Events appended after docket's last write by another process that chain correctly are accepted: another docket
command (`docket run stop`, `docket approve`) appends those, and without a sandbox an agent running docket's
own code cannot be told apart from one. With the sandbox on, no agent can open the ledger at all (docs/security.md,
"What docket promises").

A ledger in PostgreSQL has no file to swap: its watch checks the chain alone, through the same reader port.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....domain.kernel.chain import GENESIS_DIGEST, ChainHead, recorded_time, verify_chain
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import LedgerTampered, StorageFailed
from .reader import ledger_reader
from .database_url import redacted

__all__ = ["FileIdentity", "LedgerWatch", "watch_database", "watch_ledger"]

WRITES_PER_CHECK = 256  # heads kept at most between two checks

Readers = Callable[[], AbstractContextManager[Any]]  # opens a LedgerReader (adapters/service_layer/kernel/ports.py)


@dataclass(frozen=True)
class FileIdentity:
    device: int
    inode: int


def _identity(path: Path) -> FileIdentity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return FileIdentity(st.st_dev, st.st_ino)


class LedgerWatch:
    """The ledger's chain heads this process wrote and verified, and its file's identity when it is a file;
    thread-safe."""

    def __init__(self, where: str, readers: Readers, head: ChainHead, head_time: str | None, *,
                 path: Path | None = None, identity: FileIdentity | None = None):
        self.where = where
        self.readers = readers
        self.path = path
        self.identity = identity
        self._verified = head  # every event up to here chains from what this process knew
        self._verified_time = head_time
        self._written: list[ChainHead] = []  # the head each of this process's writes left, since the last check
        self._found: LedgerTampered | None = None  # what a check made while writing found: raised by every check
        self._lock = threading.Lock()

    def wrote(self, head: ChainHead) -> None:
        """This process appended events up to head (its digest as computed in the appending transaction). Every
        WRITES_PER_CHECK writes, the heads kept so far are checked and let go (a run that never checks would keep
        one per event); what that finds is raised by the next check, never by the write that succeeded."""
        with self._lock:
            self._written.append(head)
            if len(self._written) >= WRITES_PER_CHECK and self._found is None:
                try:
                    self._check()
                except LedgerTampered as e:
                    self._found = e
                except (OSError, sqlite3.Error, StorageFailed):
                    pass  # unreadable for now: the heads are kept for the next check

    def check(self) -> ChainHead:
        """The verified head now; LedgerTampered (ledger-vanished, ledger-replaced, ledger-rewritten) when the
        file is not the one docket opened or its events are not the ones docket wrote."""
        with self._lock:
            if self._found is not None:
                raise self._found
            return self._check()

    def _check_file(self) -> None:
        if self.path is None:
            return
        found = _identity(self.path)
        if found is None:
            raise LedgerTampered(Code.LEDGER_VANISHED, f"the ledger {self.where} vanished during the run; "
                                                       "nothing is delivered")
        if found != self.identity:
            raise LedgerTampered(Code.LEDGER_REPLACED, f"the ledger {self.where} was replaced during the run "
                                 f"(inode {found.inode}, not the {self.identity.inode if self.identity else None} "
                                 "docket opened); "
                                 "nothing is delivered")

    def _check(self) -> ChainHead:
        """check(), the lock held."""
        self._check_file()
        with self.readers() as reader:
            self._check_file()  # swapped between the stat and the open
            for known in (self._verified, *self._written):
                digest = reader.digest_at(known.position) or None
                if known.position and digest != known.digest:
                    raise LedgerTampered(Code.LEDGER_REWRITTEN, _rewritten(self.where, known, digest))
            rows = reader.chain_rows(after=self._verified.position)
            try:
                head, broken = verify_chain(rows, start=self._verified, start_time=self._verified_time)
            finally:
                getattr(rows, "close", lambda: None)()
            if broken is not None:
                raise LedgerTampered(Code.LEDGER_REWRITTEN, f"the ledger {self.where} was changed during the "
                                     f"run: position {broken.position}: {broken.reason}; nothing is delivered")
            last_written = max((h.position for h in self._written), default=0)
            if head.position < last_written:
                raise LedgerTampered(Code.LEDGER_REWRITTEN, f"the ledger {self.where} ends at position "
                                     f"{head.position}, before the {last_written} docket wrote; "
                                     "nothing is delivered")
            if head.position > self._verified.position:
                row = reader.event_at(head.position)
                self._verified_time = recorded_time(row[4]) if row else self._verified_time
            self._verified, self._written = head, []
        return head


def _rewritten(where: str, known: ChainHead, digest: str | None) -> str:
    found = "is gone" if digest is None else f"has digest {digest[:16]}…"
    return (f"the ledger {where} was rewritten during the run: the event at position {known.position} {found}, "
            f"not the {known.digest[:16]}… docket wrote or verified; nothing is delivered")


def _watch(where: str, readers: Readers, **file: Any) -> LedgerWatch:
    with readers() as reader:
        head = reader.chain_head() or ChainHead(0, GENESIS_DIGEST)
        row = reader.event_at(head.position) if head.position else None
    return LedgerWatch(where, readers, head, recorded_time(row[4]) if row else None, **file)


def watch_ledger(path: Path) -> LedgerWatch:
    """The watch over the ledger file at path as it is now: its identity and its chain head."""
    identity = _identity(path)
    if identity is None:
        raise FileNotFoundError(path)
    return _watch(str(path), lambda: ledger_reader(path), path=path, identity=identity)


def watch_database(url: str) -> LedgerWatch:
    """The watch over the PostgreSQL ledger at url as it is now: its chain head."""
    from .postgres_reader import postgres_reader  # here: psycopg is an extra, imported where a URL names it

    return _watch(redacted(url), lambda: postgres_reader(url))
