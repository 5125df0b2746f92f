"""The ledger's Merkle tree from kept block hashes answers exactly as the reference tree (domain/kernel/merkle.Tree)."""

from __future__ import annotations

import pytest

from docket.adapters.service_layer.kernel.ledger_tree import ledger_tree
from tests.fakes.ledger_reader import FakeLedgerReader
from docket.domain.kernel.merkle import Tree, verify_consistency, verify_inclusion

from .builders import at

LEAVES = 300


def _reader(count: int) -> FakeLedgerReader:
    reader = FakeLedgerReader()
    _append(reader, count)
    return reader


def _append(reader: FakeLedgerReader, count: int) -> None:
    for _ in range(count):
        n = len(reader.rows) + 1
        reader.append(f"run:r{n % 7}", "RunOpened.v1", {"n": n}, at(n))


def _digests(reader: FakeLedgerReader) -> list[bytes]:
    return list(reader.chain_digests())


def _sample(size: int) -> list[int]:
    """Every index of a small tree; the edges, the block boundaries and a stride of a larger one."""
    if size <= 40:
        return list(range(size))
    return sorted({0, 1, size // 2, size - 2, size - 1, *range(3, size, 13), *(2**k for k in range(9) if 2**k < size),
                   *(2**k - 1 for k in range(1, 9) if 2**k <= size)})


def _assert_same(tree, reference: Tree, size: int) -> None:
    assert tree.size == size
    assert tree.root() == reference.root(size)
    for index in _sample(size):
        assert tree.inclusion_proof(index) == reference.inclusion_proof(index, size), (size, index)
    for old in _sample(size):
        if old:
            assert tree.consistency_proof(old) == reference.consistency_proof(old, size), (size, old)
    for smaller in {0, size // 3, size - 1} - {-1}:  # proofs for a smaller tree, asked of this one
        assert tree.root(smaller) == reference.root(smaller)
        if smaller:
            assert tree.inclusion_proof(smaller - 1, smaller) == reference.inclusion_proof(smaller - 1, smaller)


@pytest.mark.parametrize("height", [0, 2, 3, 5])
def test_every_size_from_0_to_300_answers_as_the_reference_with_nothing_kept(height):
    reader = _reader(LEAVES)
    reference = Tree(_digests(reader))
    for size in range(LEAVES + 1):
        _assert_same(ledger_tree(reader, size, height=height), reference, size)


@pytest.mark.parametrize("height", [2, 3])
def test_every_size_answers_as_the_reference_from_kept_blocks(height):
    reader = _reader(LEAVES)
    reference = Tree(_digests(reader))
    ledger_tree(reader, LEAVES, keep=reader.keep_merkle_nodes, height=height)
    assert len(reader.kept_nodes) == LEAVES >> height
    for size in range(LEAVES + 1):
        _assert_same(ledger_tree(reader, size, height=height), reference, size)


def test_sizes_around_powers_of_two_with_the_default_block():
    reader = _reader(4100)
    reference = Tree(_digests(reader))
    sizes = sorted({s for k in range(13) for s in (2**k - 1, 2**k, 2**k + 1) if 0 <= s <= 4100} | {3 * 1024, 4100})
    for size in sizes:
        _assert_same(ledger_tree(reader, size), reference, size)
    ledger_tree(reader, 4100, keep=reader.keep_merkle_nodes)
    assert sorted(node for _height, node in reader.kept_nodes) == [0, 1, 2, 3]
    for size in sizes:
        _assert_same(ledger_tree(reader, size), reference, size)


def test_appends_after_blocks_were_kept_extend_the_kept_blocks():
    reader = _reader(37)
    ledger_tree(reader, 37, keep=reader.keep_merkle_nodes, height=3)
    assert sorted(node for _height, node in reader.kept_nodes) == [0, 1, 2, 3]
    for more in (1, 2, 5, 17, 64):
        _append(reader, more)
        size = len(reader.rows)
        kept = dict(reader.kept_nodes)
        tree = ledger_tree(reader, size, keep=reader.keep_merkle_nodes, height=3)
        assert {key: value for key, value in reader.kept_nodes.items() if key in kept} == kept  # only added to
        assert len(reader.kept_nodes) == size >> 3
        _assert_same(tree, Tree(_digests(reader)), size)


def test_a_wrong_kept_hash_only_makes_proofs_that_fail_verification():
    reader = _reader(64)
    digests = _digests(reader)
    ledger_tree(reader, 64, keep=reader.keep_merkle_nodes, height=3)
    digest, _hash = reader.kept_nodes[(3, 2)]
    reader.kept_nodes[(3, 2)] = (digest, b"\x00" * 32)
    tree = ledger_tree(reader, 64, height=3)
    true_root = Tree(digests).root()
    assert tree.root() != true_root
    assert not verify_inclusion(digests[5], 5, 64, tree.inclusion_proof(5), true_root)
    assert not verify_consistency(24, 64, Tree(digests).root(24), true_root, tree.consistency_proof(24))


def test_kept_blocks_of_a_rewritten_chain_are_not_used():
    reader = _reader(64)
    ledger_tree(reader, 64, keep=reader.keep_merkle_nodes, height=3)
    rewritten = _reader(0)
    rewritten.kept_nodes = dict(reader.kept_nodes)  # another ledger's blocks, e.g. after a rewrite
    for _ in range(64):
        n = len(rewritten.rows) + 1
        rewritten.append("run:other", "RunOpened.v1", {"n": n}, at(n))
    assert rewritten.merkle_nodes(3, 8) == {}
    assert ledger_tree(rewritten, 64, height=3).root() == Tree(_digests(rewritten)).root()


def test_a_size_past_the_chain_is_refused():
    reader = _reader(10)
    with pytest.raises(ValueError):
        ledger_tree(reader, 11)
    assert ledger_tree(reader, 0).root() == Tree([]).root()
