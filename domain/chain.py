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

__all__ = [
    "CHAIN_ALGORITHM",
    "GENESIS_DIGEST",
    "ChainBreak",
    "ChainHead",
    "ChainRow",
    "chain_entry",
    "next_digest",
    "verify_chain",
]

CHAIN_ALGORITHM = "sha256-chain-v1"
GENESIS_DIGEST = hashlib.sha256(b"docket ledger genesis v1").hexdigest()

_sha256 = hashlib.sha256
_quote = json.JSONEncoder(ensure_ascii=False).encode


def chain_entry(position: int, stream: str, version: int, type_: str, state: bytes) -> bytes:
    """canonical_json of the chain record of one event (keys already in order)."""
    return (
        f'{{"position":{int(position)},"state_sha256":"{_sha256(state).hexdigest()}",'
        f'"stream":{_quote(stream)},"type":{_quote(type_)},"version":{int(version)}}}'
    ).encode("utf-8")


def next_digest(previous: str, entry: bytes) -> str:
    return _sha256(bytes.fromhex(previous) + entry).hexdigest()


@dataclass(frozen=True)
class ChainRow:
    """One event as stored, with the digest stored beside it (None if missing)."""

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
    rows: Iterable[ChainRow],
    *,
    anchor: ChainHead | None = None,
    start: ChainHead = ChainHead(0, GENESIS_DIGEST),
) -> tuple[ChainHead, ChainBreak | None]:
    """Recompute the chain over rows in position order.

    Returns the verified head and the first break, if any. A row whose position
    is not the next one, whose digest is missing or differs from the recomputed
    one, breaks the chain there. With an anchor, the ledger must reach the
    anchor's position and have the anchor's digest there.
    """
    expected_position = start.position + 1
    digest = start.digest
    head = start
    for row in rows:
        if row.position != expected_position:
            return head, ChainBreak(expected_position, "event missing (positions are not contiguous)")
        digest = _sha256(
            bytes.fromhex(digest) + chain_entry(row.position, row.stream, row.version, row.type, row.state)
        ).hexdigest()
        if row.digest is None:
            return head, ChainBreak(row.position, "digest missing for stored event")
        if row.digest != digest:
            return head, ChainBreak(row.position, "digest does not match the recomputed chain")
        head = ChainHead(row.position, digest)
        expected_position += 1
        if anchor is not None and row.position == anchor.position and digest != anchor.digest:
            return head, ChainBreak(row.position, "digest differs from the anchor")
    if anchor is not None and head.position < anchor.position:
        return head, ChainBreak(head.position + 1, f"ledger ends before the anchor at position {anchor.position}")
    return head, None
