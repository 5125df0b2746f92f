"""Verifying a ledger file: its genesis, its hash chain, its tail, its schema, and anchors read from a file
(a position and digest, or an exported receipt: also the Merkle root it was sealed at).

Reads through the LedgerReader port; pydantic is imported only to check the
genesis event (position 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.kernel.canonical import strict_json
from ....domain.kernel.chain import CHAIN_ALGORITHM, GENESIS_DIGEST, ChainBreak, ChainHead
from ....domain.kernel.errors import BadInput, NotFound, VerificationFailed
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from .ports import LedgerReader

__all__ = ["MAX_POSITION", "Anchor", "genesis_break", "ledger_repository_id", "read_anchor", "verify_ledger"]

MAX_POSITION = 2**53 - 1  # what every store and JSON reader can hold
HEX_DIGITS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Anchor:
    """What the ledger must still hold: the digest at a position and, for an exported receipt, the Merkle root
    over positions 1..position it was sealed with."""

    head: ChainHead
    merkle_root: str | None = None
    source: str = "the anchor"


def read_anchor(path: str | Path) -> Anchor:
    """An anchor file: JSON with the position and digest at its top or under 'head' (what `docket verify --json`
    prints), or a bundle from `docket export` (its receipt's ledger.tree_size, head_digest and root)."""
    from ...world.files.files import read_named_file
    from ...world.ledger.signing import MAX_BUNDLE_BYTES

    data = read_named_file(path, MAX_BUNDLE_BYTES, code="bad-anchor",  # a FIFO or /dev/zero: refused at once
                           missing=NotFound(Code.ANCHOR_NOT_FOUND, f"no anchor file {path}"))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(Code.BAD_ANCHOR, f"{path} is not a JSON anchor: {e}") from None
    from .proofs import is_bundle, sealed_head_of_bundle

    if is_bundle(text):
        sealed = sealed_head_of_bundle(path)
        return Anchor(ChainHead(sealed.size, sealed.head_digest), sealed.root, f"the receipt in {Path(path).name}")
    try:
        doc = strict_json(text)
    except (ValueError, RecursionError) as e:
        raise BadInput(Code.BAD_ANCHOR, f"{path} is not a JSON anchor: {e}") from None
    head = doc.get("head", doc) if isinstance(doc, dict) else None
    position = head.get("position") if isinstance(head, dict) else None
    digest = head.get("digest") if isinstance(head, dict) else None
    # bool is an int in Python: `true` is not position 1.
    if type(position) is not int or not 1 <= position <= MAX_POSITION:
        raise BadInput(Code.BAD_ANCHOR, f"{path} needs a 'position' (a whole number from 1), at the top or under 'head'")
    if not (isinstance(digest, str) and len(digest) == 64 and set(digest) <= HEX_DIGITS):
        raise BadInput(Code.BAD_ANCHOR, f"{path} needs a 'digest' (64 lowercase hex digits), at the top or under 'head'")
    return Anchor(ChainHead(position, digest))


def verify_ledger(reader: LedgerReader, *, anchor: Anchor | None = None, until: int | None = None,
                  progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Recompute the chain (and an exported receipt's Merkle root, from the digests);
    raise VerificationFailed naming the first bad position (or the root).

    ``progress(position)`` is called for each row when given. Returns the
    report `docket verify --json` prints: events, head and algorithm.
    """
    broken = genesis_break(reader)
    head: ChainHead | None = None
    if broken is None:
        head, broken = reader.verify_chain(anchor=anchor.head if anchor else None, until=until, progress=progress)
    if broken is None and until is None:
        assert head is not None  # no break at the genesis: the chain was walked
        orphan = reader.orphan_digest_after(head.position)
        if orphan is not None:
            broken = ChainBreak(head.position + 1, "event missing; its digest is still recorded")
    if broken is not None:
        raise VerificationFailed(Code.CHAIN_BROKEN, f"position {broken.position}: {broken.reason}")
    reader.check_schema()
    assert head is not None  # no break: the chain was walked
    if anchor is not None and anchor.merkle_root is not None:
        # From the digests alone, not the kept block hashes: what the receipt is checked against trusts nothing.
        from ....domain.kernel.merkle import Tree

        root = Tree(reader.chain_digests(until=anchor.head.position)).root().hex()
        if root != anchor.merkle_root:
            raise VerificationFailed(Code.MERKLE_ROOT_MISMATCH, f"the Merkle root over positions 1..{anchor.head.position}"
                                     f" is {root}, not the {anchor.merkle_root} of {anchor.source}")
    return {"ok": True, "events": head.position, "head": {"position": head.position, "digest": head.digest},
            "algorithm": CHAIN_ALGORITHM}


def ledger_repository_id(reader: LedgerReader) -> str | None:
    """The repository identity the ledger's genesis event records (None: bound to none, or unreadable)."""
    row = reader.event_at(1)
    if row is None:
        return None
    try:
        found = json.loads(row[4])["payload"].get("repository_id")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def genesis_break(reader: LedgerReader) -> ChainBreak | None:
    """Position 1 must be a genuine LedgerCreated: the ledger stream's first event, fixing this chain's genesis."""
    from ....domain.events import EVENT_TYPES
    from ....domain.ledger import GENESIS_TYPES, LEDGER_STREAM

    row = reader.event_at(1)
    if row is None:
        raise NotFound(Code.NO_LEDGER, "the ledger holds no events; run 'docket init' first")
    _, stream, version, topic, state = row
    genesis = None
    if topic in GENESIS_TYPES and stream == LEDGER_STREAM and version == 1:
        try:
            body = strict_json(state)
            genesis = EVENT_TYPES[topic].model_validate(
                {**body["payload"], "stream": stream, "version": version, "recorded_at": body["recorded_at"]})
        except (ValueError, KeyError, TypeError):  # pydantic's ValidationError is a ValueError
            genesis = None
    # every genesis type (GENESIS_TYPES) has both fields
    if (genesis is None or getattr(genesis, "genesis_digest", None) != GENESIS_DIGEST
            or getattr(genesis, "chain", None) != CHAIN_ALGORITHM):
        return ChainBreak(1, "position 1 is not the LedgerCreated genesis event of this chain")
    return None
