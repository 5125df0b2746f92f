"""The LedgerReader port's fake: a list of events in memory, chained as the store chains them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from docket.domain.kernel.canonical import canonical_json
from docket.domain.kernel.chain import GENESIS_DIGEST, ChainHead, ChainRow, chain_entry, next_digest

__all__ = ["FakeLedgerReader"]


class FakeLedgerReader:
    """The LedgerReader port over a list in memory: events appended here are chained as the store chains them."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int, str, bytes]] = []  # position, stream, version, type, state
        self.digests: dict[int, str] = {}
        self.kept_nodes: dict[tuple[int, int], tuple[str, bytes]] = {}  # (height, node): (digest, hash)

    def keep_merkle_nodes(self, height: int, nodes: Sequence[tuple[int, str, bytes]]) -> None:
        """The Ledger's keep_merkle_nodes, for a tree over this reader."""
        self.kept_nodes.update({(height, node): (digest, hash_) for node, digest, hash_ in nodes})

    def append(self, stream: str, type_: str, payload: dict, recorded_at: str) -> int:
        """Record one event at the next position (state as docket's mapper writes it); returns its position."""
        position = len(self.rows) + 1
        version = 1 + sum(1 for row in self.rows if row[1] == stream)
        state = canonical_json({"payload": payload, "recorded_at": recorded_at})
        self.rows.append((position, stream, version, type_, state))
        previous = self.digests.get(position - 1, GENESIS_DIGEST)
        self.digests[position] = next_digest(previous, chain_entry(position, stream, version, type_, state))
        return position

    def chain_rows(self, *, after: int = 0, until: int | None = None) -> Iterator[ChainRow]:
        return (ChainRow(*row, self.digests.get(row[0])) for row in self.events(after=after, until=until))

    def events(self, *, after: int = 0, until: int | None = None,
               topics: Sequence[str] = ()) -> Iterator[tuple[int, str, int, str, bytes]]:
        end = len(self.rows) if until is None else min(until, len(self.rows))
        return (row for row in self.rows[after:end] if not topics or row[3] in topics)

    def events_at(self, positions: Iterable[int]) -> Iterator[tuple[int, str, int, str, bytes]]:
        return (row for p in positions if (row := self.event_at(p)) is not None)

    def event_at(self, position: int) -> tuple[int, str, int, str, bytes] | None:
        return self.rows[position - 1] if 1 <= position <= len(self.rows) else None

    def head_position(self) -> int:
        return len(self.rows)

    def chain_head(self) -> ChainHead | None:
        end = max(self.digests, default=0)
        return ChainHead(end, self.digests[end]) if end else None

    def digest_at(self, position: int) -> str:
        return self.digests.get(position, "")

    def chain_digests(self, *, after: int = 0, until: int | None = None) -> Iterator[bytes]:
        end = len(self.rows) if until is None else min(until, len(self.rows))
        return (bytes.fromhex(self.digests[p]) for p in range(after + 1, end + 1) if p in self.digests)

    def merkle_nodes(self, height: int, count: int) -> dict[int, bytes]:
        return {node: hash_ for (h, node), (digest, hash_) in self.kept_nodes.items()
                if h == height and node < count and self.digests.get((node + 1) << height) == digest}

    def last_event_and_chain_end(self) -> tuple[int, int]:
        return len(self.rows), max(self.digests, default=0)

    def orphan_digest_after(self, position: int) -> int | None:
        return min((p for p in self.digests if p > position), default=None)

    def has_stream(self, stream: str) -> bool:
        return any(row[1] == stream for row in self.rows)

    def check_schema(self) -> None:
        return None  # a list has no schema to tamper with

