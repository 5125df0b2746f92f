"""The global hash chain over ledger events, as pure functions.

For the event at position n::

    entry(n)  = canonical_json({"position": n, "stream": ..., "version": ...,
                                "type": ..., "state_sha256": sha256(state)})
    digest(n) = sha256(digest(n-1) || entry(n))

``state`` is the exact stored bytes of the event (docket's mapper writes it as
the canonical JSON of ``{"payload": ..., "recorded_at": ...}``), so every byte
of the event body is covered without re-encoding it, and digest(0) is
GENESIS_DIGEST, the value the LedgerCreated event at position 1 records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "CHAIN_ALGORITHM",
    "GENESIS_DIGEST",
    "ChainBreak",
    "ChainHead",
    "ChainRow",
    "chain_entry",
    "next_digest",
    "recorded_time",
    "verify_chain",
]

CHAIN_ALGORITHM = "sha256-chain-v1"
GENESIS_DIGEST = hashlib.sha256(b"docket ledger genesis v1").hexdigest()

_sha256 = hashlib.sha256
_quote_json_string = json.encoder.encode_basestring  # what canonical_json writes for a str

# A stored state is the canonical JSON {"payload": ..., "recorded_at": "YYYY-MM-DDTHH:MM:SS.mmmZ"}: keys
# sorted, so it ends with the key, the 24-character time and '"}'.
_TIME_KEY = b'"recorded_at":"'
_PAST_TIME_KEY = b'"recorded_at":#'  # the least bytes above every string that starts with _TIME_KEY


class _Quoted(dict[str, str]):
    """Streams and types repeat: each is quoted once, inside its template's text around it.

    Looked up by subscript, not by a method call: verify does it twice per event.
    """

    def __init__(self, template: str) -> None:
        super().__init__()
        self.template = template

    def __missing__(self, text: str) -> str:
        if len(self) >= 100_000:  # a bound on memory, for ledgers with very many streams
            self.clear()
        quoted = self[text] = self.template.format(_quote_json_string(text))
        return quoted


# The chain entry of an event reads, in canonical key order:
#   {"position":P,"state_sha256":"H" + _STREAMS[stream] + _TYPES[type] + V}
_STREAMS = _Quoted(',"stream":{},"type":')
_TYPES = _Quoted('{},"version":')


def chain_entry(position: int, stream: str, version: int, type_: str, state: bytes) -> bytes:
    """canonical_json of the chain record of one event (keys already in order)."""
    return (f'{{"position":{position},"state_sha256":"{_sha256(state).hexdigest()}"'
            f'{_STREAMS[stream]}{_TYPES[type_]}{version}}}').encode()


def next_digest(previous: str, entry: bytes) -> str:
    return _sha256(bytes.fromhex(previous) + entry).hexdigest()


class ChainRow(NamedTuple):
    """One event as stored, with the digest stored beside it (None if missing).

    A plain tuple of the same six fields in this order is accepted wherever a
    ChainRow is: verification reads millions of rows straight from SQLite.
    """

    position: int
    stream: str
    version: int
    type: str
    state: bytes
    digest: str | None


@dataclass(frozen=True)
class ChainHead:
    position: int
    digest: str


@dataclass(frozen=True)
class ChainBreak:
    """The first position at which the ledger is not what its chain says."""

    position: int
    reason: str


def verify_chain(
    rows: Iterable[tuple[int, str, int, str, bytes, str | None]],
    *,
    anchor: ChainHead | None = None,
    start: ChainHead = ChainHead(0, GENESIS_DIGEST),
    start_time: str | None = None,
) -> tuple[ChainHead, ChainBreak | None]:
    """Recompute the chain over rows (ChainRow or plain tuples) in position order.

    Returns the verified head and the first break, if any. A row whose position
    is not the next one, whose digest is missing or differs from the recomputed
    one, or whose recorded time is earlier than the one before it, breaks the
    chain there. With an anchor, the ledger must reach the anchor's position and
    have the anchor's digest there. To verify from a later ``start``, give the
    recorded time of the event at that position as ``start_time`` (see
    recorded_time): the next event must not be earlier.
    """
    position, digest = start.position, bytes.fromhex(start.digest)
    anchor_position = anchor.position if anchor is not None else 0  # an int either way: the loop compares ints
    anchor_digest = anchor.digest if anchor is not None else None
    # Locals, and chain_entry written out inline: this loop runs once per event in the ledger, and each
    # step below was measured (docs/performance.md); the two digests per event are most of its time.
    sha256, streams, types = _sha256, _STREAMS, _TYPES
    last_time, past_time_key = _TIME_KEY + (start_time or "").encode(), _PAST_TIME_KEY
    for row_position, stream, version, type_, state, stored in rows:
        if row_position != position + 1:
            return _head(position, digest), ChainBreak(position + 1, "event missing (positions are not contiguous)")
        recomputed = sha256(digest + (
            f'{{"position":{row_position},"state_sha256":"{sha256(state).hexdigest()}"'
            f'{streams[stream]}{types[type_]}{version}}}').encode()).digest()
        if recomputed.hex() != stored:
            return _head(position, digest), ChainBreak(row_position, "digest missing for stored event" if stored is None
                                                       else "digest does not match the recomputed chain")
        time = state[-41:-2]  # '"recorded_at":"' and the time, as bytes: they compare as the times do
        if not last_time <= time < past_time_key:  # earlier than the last time, or no recorded time
            if time.startswith(_TIME_KEY):
                return _head(position, digest), ChainBreak(row_position, _backwards(time, last_time))
            time = last_time  # not docket's canonical state (the library's own contract tests store such)
        position, digest, last_time = row_position, recomputed, time
        if position == anchor_position and stored != anchor_digest:
            return _head(position, digest), ChainBreak(position, "digest differs from the anchor")
    if anchor is not None and position < anchor.position:
        return _head(position, digest), ChainBreak(
            position + 1, f"ledger ends before the anchor at position {anchor.position}")
    return _head(position, digest), None


def recorded_time(state: bytes) -> str | None:
    """The recorded time a stored state ends with, as the chain compares it; None if it has none."""
    time = state[-41:-2]
    if not (time.startswith(_TIME_KEY) and time < _PAST_TIME_KEY and time.isascii()):
        return None
    return time[len(_TIME_KEY):].decode()


def _backwards(time: bytes, last_time: bytes) -> str:
    earlier, later = (repr(t[len(_TIME_KEY):])[2:-1] for t in (time, last_time))  # a forger's bytes, escaped
    return f"recorded at {earlier}, earlier than the {later} of the event before it (ledger time never runs backwards)"


def _head(position: int, digest: bytes) -> ChainHead:
    return ChainHead(position, digest.hex())
