"""Merkle trees of RFC 9162 section 2.1 over the ledger's chain digests, as pure functions.

Leaf m (from 0) is the 32-byte chain digest of ledger position m + 1, so the tree of size n covers
positions 1..n. The tree hash is the Merkle Tree Hash of §2.1.1, proofs are the audit paths of §2.1.3.1
and the consistency proofs of §2.1.4.1, and the verifiers follow §2.1.3.2 and §2.1.4.2 step by step.

A Tree keeps the hash of every complete subtree (32 bytes a node, about 64 MB for a million leaves) so
that it answers many proofs, for its own size or any smaller one, after hashing each leaf once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "Tree",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root",
    "root_from_inclusion_path",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()  # MTH({}), the hash of the empty tree

_sha256 = hashlib.sha256
_CHUNK = 1 << 14  # leaves hashed per batch while a Tree is built: a bound on the bytes objects alive at once


def leaf_hash(digest: bytes) -> bytes:
    return _sha256(b"\x00" + digest).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return _sha256(b"\x01" + left + right).digest()


def root(leaves: Iterable[bytes]) -> bytes:
    """MTH(D[n]) of §2.1.1 over the leaves in order."""
    return Tree(leaves).root()


def inclusion_proof(leaves: Iterable[bytes], index: int) -> tuple[bytes, ...]:
    """PATH(index, D[n]) of §2.1.3.1, from the sibling next to the leaf up to the root's child."""
    return Tree(leaves).inclusion_proof(index)


def consistency_proof(leaves: Iterable[bytes], old_size: int) -> tuple[bytes, ...]:
    """PROOF(old_size, D[n]) of §2.1.4.1: the tree of the first old_size leaves is a prefix of this one."""
    return Tree(leaves).consistency_proof(old_size)


class Tree:
    """The Merkle tree over the given leaves, built once, answering proofs for any size up to its own."""

    __slots__ = ("_levels",)

    def __init__(self, leaves: Iterable[bytes]) -> None:
        # levels[h] holds, 32 bytes each and in order, the hashes of the complete subtrees of 2**h leaves.
        # Leaves are taken _CHUNK at a time (a power of two, so every subtree within a chunk is one of the
        # tree's), and hashed up as lists of bytes objects, which is faster than slicing the levels.
        levels: list[bytearray] = [bytearray()]
        remaining = iter(leaves)
        while hashes := [_sha256(b"\x00" + leaf).digest() for _, leaf in zip(range(_CHUNK), remaining)]:
            height = 0
            while True:
                levels[height] += b"".join(hashes)
                if len(hashes) < 2:
                    break
                pairs = iter(hashes)
                hashes = [_sha256(b"\x01" + left + right).digest() for left, right in zip(pairs, pairs)]
                height += 1
                if height == len(levels):
                    levels.append(bytearray())
        while len(below := levels[-1]) >= 2 * HASH_SIZE:  # above the chunks: a few nodes
            level = bytes(below)
            hashes = [level[i:i + HASH_SIZE] for i in range(0, len(level), HASH_SIZE)]
            pairs = iter(hashes)
            levels.append(bytearray(b"".join([node_hash(left, right) for left, right in zip(pairs, pairs)])))
        self._levels = levels  # never changed after this

    @property
    def size(self) -> int:
        return len(self._levels[0]) // HASH_SIZE

    def root(self, size: int | None = None) -> bytes:
        """MTH of the first `size` leaves (all of them by default)."""
        return self._hash(0, self._size(size))

    def inclusion_proof(self, index: int, size: int | None = None) -> tuple[bytes, ...]:
        """PATH(index, D[size]) of §2.1.3.1. Raises ValueError unless 0 <= index < size."""
        size = self._size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf index {index} is not in a tree of size {size}")
        path, start, end = [], 0, size
        while end - start > 1:  # down from the root: the sibling of the half that holds the leaf
            k = _split(end - start)
            if index < start + k:
                path.append(self._hash(start + k, end))
                end = start + k
            else:
                path.append(self._hash(start, start + k))
                start += k
        return tuple(reversed(path))

    def consistency_proof(self, old_size: int, size: int | None = None) -> tuple[bytes, ...]:
        """PROOF(old_size, D[size]) of §2.1.4.1. Raises ValueError unless 0 < old_size <= size."""
        size = self._size(size)
        if not 0 < old_size <= size:
            raise ValueError(f"no consistency proof from size {old_size} to size {size}")
        proof, start, end, whole_old_tree = [], 0, size, True  # SUBPROOF(m, D[start:end], b), m = old_size - start
        while old_size != end:
            k = _split(end - start)
            if old_size <= start + k:
                proof.append(self._hash(start + k, end))
                end = start + k
            else:
                proof.append(self._hash(start, start + k))
                start += k
                whole_old_tree = False
        if not whole_old_tree:
            proof.append(self._hash(start, end))
        return tuple(reversed(proof))

    def _size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise ValueError(f"size {size} is not within a tree of {self.size} leaves")
        return size

    def _hash(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for a range of §2.1.1's recursion: its left part is always a stored complete subtree."""
        width = end - start
        if width & (width - 1) == 0:
            if width == 0:
                return EMPTY_ROOT
            height = width.bit_length() - 1
            offset = (start >> height) * HASH_SIZE
            return bytes(self._levels[height][offset:offset + HASH_SIZE])
        k = _split(width)
        return node_hash(self._hash(start, start + k), self._hash(start + k, end))


def root_from_inclusion_path(leaf: bytes, index: int, size: int, path: Iterable[bytes]) -> bytes | None:
    """The root that §2.1.3.2 computes from a leaf's hash and its audit path; None where the algorithm fails."""
    if not 0 <= index < size:  # step 1
        return None
    fn, sn, r = index, size - 1, leaf  # steps 2 and 3
    for p in path:  # step 4
        if sn == 0 or len(p) != HASH_SIZE:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None  # step 5, with the root compared by the caller


def verify_inclusion(leaf_digest: bytes, index: int, size: int, path: Iterable[bytes], root: bytes) -> bool:
    """Whether path proves leaf_digest at index in the tree of size `size` whose hash is root (§2.1.3.2)."""
    computed = root_from_inclusion_path(leaf_hash(leaf_digest), index, size, path)
    return computed is not None and len(root) == HASH_SIZE and computed == root


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Iterable[bytes]) -> bool:
    """Whether proof shows the tree (old_size, old_root) is a prefix of the tree (new_size, new_root) (§2.1.4.2).

    Equal sizes need an empty proof and equal roots; a proof from the empty tree proves nothing and fails.
    """
    proof = list(proof)
    if not (0 < old_size <= new_size and len(old_root) == HASH_SIZE and len(new_root) == HASH_SIZE
            and all(len(c) == HASH_SIZE for c in proof)):
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:  # step 1
        return False
    if old_size & (old_size - 1) == 0:  # step 2
        proof.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1  # step 3
    while fn & 1:  # step 4
        fn, sn = fn >> 1, sn >> 1
    fr = sr = proof[0]  # step 5
    for c in proof[1:]:  # step 6
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old_root and sr == new_root and sn == 0  # step 7


def _split(width: int) -> int:
    """The largest power of two smaller than width (width > 1): the size of §2.1.1's left subtree."""
    return 1 << ((width - 1).bit_length() - 1)
