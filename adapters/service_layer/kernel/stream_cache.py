"""What a process already folded of each stream, so the next read folds only the events appended since.

Streams are append-only: the state folded up to version v stays the state at
version v. A read asks the store for the stream's events from version v on
(one indexed query, whatever the stream's length) and folds only those after
v. Before trusting the entry it checks that the event at version v is still
the one it folded (same ledger position, same stored bytes): a ledger file
rewritten or replaced under the process is then folded again from its start
(or its snapshot), never answered from memory. Another process's appends are
simply the events after v, read like any others, so a decision inside the
write transaction still sees the latest version.

It also keeps which intents were unresolved as of the head the effector last
scanned to (Ledger._unresolved_since_cursor), and remembers where the process appended each intent, so that driving one
named intent starts looking at its position instead of the chain's start (the
row there is checked to still be that intent before it is trusted).

One cache is shared by every connection of a process to the same ledger file
(docket go's threads); entries are immutable tuples swapped whole, so threads
need no lock to read, and the cache holds at most ``limit`` streams (the
least recently stored go first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Folded", "PendingScan", "StreamCache"]

DEFAULT_LIMIT = 20_000  # streams; a 1,000-task run has about 5 per task


@dataclass(frozen=True)
class Folded:
    """A stream folded up to ``version``, whose last event sits at ``position`` with these stored bytes."""

    apply: Callable[..., Any]
    version: int
    position: int
    stored: bytes
    state: Any


@dataclass(frozen=True)
class PendingScan:
    """The intents unresolved as of ledger position scanned_to, among those after start (each intent id with the
    positions of the intent and its unknowns)."""

    start: int
    scanned_to: int
    unresolved: dict[str, list[int]]


class StreamCache:
    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.limit = limit
        self._entries: OrderedDict[str, Folded] = OrderedDict()
        self._intents: OrderedDict[str, int] = OrderedDict()  # intent id -> the position this process appended it at
        self.pending_scan: PendingScan | None = None  # the effector's last scan for unresolved intents
        self.pending_lock = threading.Lock()
        self._lock = threading.Lock()

    def get(self, stream: str, apply: Callable[..., Any]) -> Folded | None:
        entry = self._entries.get(stream)
        return entry if entry is not None and entry.apply is apply else None

    def put(self, stream: str, entry: Folded) -> None:
        """Keep entry unless the cache already holds a later version of the stream (another thread's)."""
        with self._lock:
            current = self._entries.get(stream)
            if current is not None and current.apply is entry.apply and current.version > entry.version:
                return
            self._entries.pop(stream, None)
            self._entries[stream] = entry
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)

    def remember_intents(self, positions: dict[str, int]) -> None:
        """Where this process appended intents (intent id -> ledger position)."""
        with self._lock:
            for intent_id, position in positions.items():
                self._intents.pop(intent_id, None)
                self._intents[intent_id] = position
            while len(self._intents) > self.limit:
                self._intents.popitem(last=False)

    def intent_position(self, intent_id: str) -> int | None:
        return self._intents.get(intent_id)

    def forget(self, stream: str) -> None:
        with self._lock:
            self._entries.pop(stream, None)

    def __len__(self) -> int:
        return len(self._entries)
