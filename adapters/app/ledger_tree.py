"""The RFC 9162 Merkle tree over the ledger's chain digests: leaf n-1 is the 32-byte chain digest of position n.

One function, so receipts, exports and consistency proofs all build the tree the same way.
"""

from __future__ import annotations

from typing import Any

from ...domain.merkle import Tree

__all__ = ["ledger_tree"]


def ledger_tree(reader: Any, size: int) -> Tree:
    """The tree over positions 1..size. ValueError when the ledger has fewer digests than that."""
    tree = Tree(reader.chain_digests(until=size))
    if tree.size != size:
        raise ValueError(f"the ledger has {tree.size} chain digests, not {size}")
    return tree
