"""The RFC 9162 Merkle tree over the ledger's chain digests: leaf n-1 is the 32-byte chain digest of position n.

One function, so receipts, exports and consistency proofs all build the tree the same way.

A tree over a million leaves would hash two million times and read every digest. Instead the hashes of
complete, aligned blocks of 2**BLOCK_HEIGHT leaves are kept in the ledger file (the store's merkle_nodes
table: the append that completes a block keeps its hash), each with the chain digest at its last position:
the reader hands back only those the chain still holds, so a rewritten ledger never reuses them. A tree is
then the kept block hashes (about a thousand for a million leaves) plus, read when a root or a proof needs
inside one, the digests of a single block: the last, partial one for a root, the block holding the leaf for
an inclusion proof. Blocks not kept yet (a ledger written before docket kept them) are hashed from their
digests, and kept when the caller can write (``keep``). domain/kernel/merkle.Tree stays the reference: LedgerTree
answers through its algorithms, only the hashes of complete subtrees come from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from typing import TYPE_CHECKING

from ....domain.kernel.merkle import Tree, node_hash
from ...world.ledger.ledger_rows import MERKLE_BLOCK_HEIGHT

if TYPE_CHECKING:
    from .ports import LedgerReader

__all__ = ["BLOCK_HEIGHT", "LedgerTree", "ledger_tree", "repair_kept_blocks", "wrong_kept_blocks"]

BLOCK_HEIGHT = MERKLE_BLOCK_HEIGHT  # blocks of 1,024 leaves: a million leaves are 976 kept hashes and < 1,024 digests
_BLOCKS_READ_AT_ONCE = 64  # blocks hashed from one read of their digests: bounds the memory while catching up

KeepNodes = Callable[[int, Sequence[tuple[int, str, bytes]]], None]  # Ledger.keep_merkle_nodes


def ledger_tree(reader: LedgerReader, size: int, *, keep: KeepNodes | None = None, height: int = BLOCK_HEIGHT) -> LedgerTree:
    """The tree over positions 1..size. ValueError when the ledger has fewer digests than that.

    Block hashes the ledger does not hold yet are computed from the digests, and handed to ``keep``
    (Ledger.keep_merkle_nodes) when given, so the next tree over this ledger reads them instead.
    """
    if size < 0 or (size and not reader.digest_at(size)):
        raise ValueError(f"the ledger has no chain digest at position {size}")
    count = size >> height
    blocks = reader.merkle_nodes(height, count)
    missing = [block for block in range(count) if block not in blocks]
    computed = _block_hashes(reader, missing, height)
    if computed and keep is not None:
        keep(height, computed)
    blocks.update((block, hash_) for block, _digest, hash_ in computed)
    return LedgerTree(reader, size, [blocks[block] for block in range(count)], height)


class LedgerTree(Tree):
    """domain.merkle.Tree's answers (size, root, inclusion_proof, consistency_proof) from block hashes."""

    __slots__ = ("_block_trees", "_height", "_leaves", "_reader", "_upper")

    def __init__(self, reader: LedgerReader, size: int, block_hashes: list[bytes], height: int) -> None:
        # Tree.__init__ is not called: it would hash every leaf, which is what this class avoids.
        self._reader, self._leaves, self._height = reader, size, height
        upper = [block_hashes]  # upper[k][i]: the hash of node i of height `height + k`
        while len(below := upper[-1]) >= 2:
            pairs = iter(below)
            upper.append([node_hash(left, right) for left, right in zip(pairs, pairs)])
        self._upper = upper
        self._block_trees: dict[int, Tree] = {}  # the reference tree over one block's digests, read when needed

    @property
    def size(self) -> int:
        return self._leaves

    def _hash(self, start: int, end: int) -> bytes:
        width = end - start
        if width == 0 or width & (width - 1):  # empty, or not one complete subtree: the reference's recursion
            return super()._hash(start, end)
        height = width.bit_length() - 1
        if height >= self._height:
            return self._upper[height - self._height][start >> height]
        block = start >> self._height
        first = block << self._height
        return self._block_tree(block)._hash(start - first, end - first)

    def _block_tree(self, block: int) -> Tree:
        tree = self._block_trees.get(block)
        if tree is None:
            first = block << self._height
            last = min(first + (1 << self._height), self._leaves)
            tree = self._block_trees[block] = Tree(self._reader.chain_digests(after=first, until=last))
            if tree.size != last - first:
                raise ValueError(f"the ledger has {tree.size} chain digests in positions {first + 1}..{last}")
        return tree


def _block_hashes(reader: LedgerReader, blocks: list[int], height: int) -> list[tuple[int, str, bytes]]:
    """(block, chain digest at its last position (hex), hash) of each block, from its digests.

    Runs of consecutive blocks are read with one query each, a few dozen blocks at a time.
    """
    width = 1 << height
    found: list[tuple[int, str, bytes]] = []
    i = 0
    while i < len(blocks):
        run = [blocks[i]]
        while len(run) < _BLOCKS_READ_AT_ONCE and i + len(run) < len(blocks) and blocks[i + len(run)] == run[-1] + 1:
            run.append(blocks[i + len(run)])
        digests = reader.chain_digests(after=run[0] * width, until=(run[-1] + 1) * width)
        for block in run:
            leaves = list(islice(digests, width))
            if len(leaves) != width:
                raise ValueError(f"the ledger has {len(leaves)} chain digests in block {block}, not {width}")
            found.append((block, leaves[-1].hex(), Tree(leaves).root()))
        i += len(run)
    return found


def wrong_kept_blocks(reader: LedgerReader, size: int, *, height: int = BLOCK_HEIGHT) -> list[tuple[int, int, str, bytes]]:
    """The kept block hashes within positions 1..size (those still matching the chain) that are not the hash
    of their chain digests: (first position, last position, digest, the right hash) of each."""
    kept = reader.merkle_nodes(height, size >> height)
    return [((block << height) + 1, (block + 1) << height, digest, hash_)
            for block, digest, hash_ in _block_hashes(reader, sorted(kept), height) if kept[block] != hash_]


def repair_kept_blocks(reader: LedgerReader, size: int, keep: KeepNodes, *, height: int = BLOCK_HEIGHT) -> list[tuple[int, int]]:
    """Replace the wrong kept block hashes (wrong_kept_blocks) by the right ones; their position ranges.

    Replay's repair. Verify does not recompute them (it would double its time): a forged hash only makes
    roots and proofs that `verify --anchor` and `prove-consistency` then refuse, both checking sealed roots
    against the digests (verify) or against the roots sealed before (prove-consistency)."""
    wrong = wrong_kept_blocks(reader, size, height=height)
    if wrong:
        keep(height, [((last >> height) - 1, digest, hash_) for _first, last, digest, hash_ in wrong])
    return [(first, last) for first, last, _digest, _hash in wrong]
