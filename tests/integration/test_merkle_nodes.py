"""Kept Merkle block hashes in the ledger file: written through the store, read only while the chain holds the
digest they were kept with, checked by verify and recomputed by replay."""

from __future__ import annotations

import sqlite3

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.ledger_tree import ledger_tree, repair_kept_blocks, wrong_kept_blocks
from docket.adapters.service_layer.kernel.verification import Anchor, verify_ledger
from docket.adapters.world.ledger.reader import ledger_reader
from docket.domain.kernel.chain import ChainHead
from docket.domain.kernel.errors import VerificationFailed
from docket.domain.kernel.merkle import Tree

from .test_idle_costs import T0, mixed

HEIGHT = 3  # blocks of 8 leaves, so a small ledger has many


@pytest.fixture
def ledger(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append(mixed(60))
    yield ledger
    ledger.close()


def _reference(reader, size: int) -> Tree:  # noqa: ANN001
    return Tree(reader.chain_digests(until=size))


def test_blocks_kept_through_the_store_are_read_back_and_give_the_reference_tree(ledger, ledger_path):
    with ledger_reader(ledger_path) as reader:
        head = reader.head_position()
        assert reader.merkle_nodes(HEIGHT, head >> HEIGHT) == {}
        ledger_tree(reader, head, keep=ledger.keep_merkle_nodes, height=HEIGHT)
        kept = reader.merkle_nodes(HEIGHT, head >> HEIGHT)
        assert sorted(kept) == list(range(head >> HEIGHT))
        reference = _reference(reader, head)
        for size in range(head + 1):
            tree = ledger_tree(reader, size, height=HEIGHT)
            assert tree.root() == reference.root(size)
            if size:
                assert tree.inclusion_proof(size // 2) == reference.inclusion_proof(size // 2, size)
        assert wrong_kept_blocks(reader, head, height=HEIGHT) == []


def test_the_append_that_completes_a_block_keeps_its_hash(tmp_path):
    from docket.adapters.service_layer.kernel.ledger_tree import BLOCK_HEIGHT

    ledger_path = tmp_path / "appended.sqlite"
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    events = mixed(3300)
    ledger.append(events[:1020])  # up to 1,021: no block complete yet
    for event in events[1020:1030]:  # one at a time across position 1,024
        ledger.append([event])
    ledger.append(events[1030:])  # one batch completing blocks 2 and 3
    width = 1 << BLOCK_HEIGHT
    with ledger_reader(ledger_path) as reader:
        head = reader.head_position()
        kept = reader.merkle_nodes(BLOCK_HEIGHT, head >> BLOCK_HEIGHT)
        assert sorted(kept) == list(range(head // width)) == [0, 1, 2]
        digests = list(reader.chain_digests())
        assert [kept[block] for block in sorted(kept)] == [Tree(digests[b * width:(b + 1) * width]).root()
                                                           for b in sorted(kept)]
        assert wrong_kept_blocks(reader, head) == []
    ledger.close()


def test_blocks_of_a_rewritten_chain_are_not_read(ledger, ledger_path):
    with ledger_reader(ledger_path) as reader:
        head = reader.head_position()
        ledger_tree(reader, head, keep=ledger.keep_merkle_nodes, height=HEIGHT)
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE chain SET digest = ? WHERE position = ?", ("0" * 64, 16))
    conn.close()
    with ledger_reader(ledger_path) as reader:
        assert 1 not in reader.merkle_nodes(HEIGHT, head >> HEIGHT)  # positions 9..16: its digest changed
        assert 0 in reader.merkle_nodes(HEIGHT, head >> HEIGHT)


def test_replay_finds_a_wrong_kept_hash_and_puts_it_right_and_an_anchor_never_trusts_it(tmp_path):
    from docket.adapters.service_layer.kernel.ledger_tree import BLOCK_HEIGHT

    ledger_path = tmp_path / "big.sqlite"
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append(mixed(2100))
    with ledger_reader(ledger_path) as reader:
        head = reader.head_position()
        assert head >= 2 << BLOCK_HEIGHT
        assert sorted(reader.merkle_nodes(BLOCK_HEIGHT, 2)) == [0, 1]  # kept by the appends
        true_root = _reference(reader, head).root()
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE merkle_nodes SET hash = zeroblob(32) WHERE node = 1")
    conn.close()
    with ledger_reader(ledger_path) as reader:
        assert ledger_tree(reader, head).root() != true_root
        anchor = Anchor(ChainHead(head, reader.digest_at(head)), true_root.hex())
        assert verify_ledger(reader, anchor=anchor)["ok"]  # the sealed root is checked from the digests
        assert repair_kept_blocks(reader, head, ledger.keep_merkle_nodes) == [(1025, 2048)]
        assert repair_kept_blocks(reader, head, ledger.keep_merkle_nodes) == []
        assert ledger_tree(reader, head).root() == true_root
    ledger.close()


def test_replay_reports_and_repairs_a_wrong_kept_hash(tmp_path):
    import subprocess
    import sys

    ledger_path = tmp_path / "replayed.sqlite"
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append(mixed(1100))
    ledger.close()
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE merkle_nodes SET hash = zeroblob(32) WHERE node = 0")
    conn.close()

    def replay() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "docket", "--ledger", str(ledger_path), "replay"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    first = replay()
    assert first.returncode == 1 and first.stderr.startswith("docket: error: merkle-node-drift: "), first.stderr
    assert "positions 1..1024; recomputed" in first.stdout
    assert replay().returncode == 0


def test_an_anchor_with_a_merkle_root_is_checked_against_the_digests(ledger, ledger_path):
    with ledger_reader(ledger_path) as reader:
        size = reader.head_position() - 5
        head = ChainHead(size, reader.digest_at(size))
        root = _reference(reader, size).root().hex()
        assert verify_ledger(reader, anchor=Anchor(head, root))["ok"]
        with pytest.raises(VerificationFailed) as e:
            verify_ledger(reader, anchor=Anchor(head, "ab" * 32, "the receipt in r1.jsonl"))
        assert e.value.code == "merkle-root-mismatch" and "the receipt in r1.jsonl" in e.value.message


def test_the_fake_reader_keeps_and_reads_blocks_as_the_sqlite_one_does(ledger, ledger_path):
    import json

    from tests.fakes.ledger_reader import FakeLedgerReader

    fake = FakeLedgerReader()
    with ledger_reader(ledger_path) as real:
        for _position, stream, _version, type_, state in real.events():
            body = json.loads(state)
            fake.append(stream, type_, body["payload"], body["recorded_at"])
        head = real.head_position()
        ledger_tree(real, head - 9, keep=ledger.keep_merkle_nodes, height=HEIGHT)
        ledger_tree(fake, head - 9, keep=fake.keep_merkle_nodes, height=HEIGHT)
        for count in (0, 1, (head - 9) >> HEIGHT, head >> HEIGHT):
            assert fake.merkle_nodes(HEIGHT, count) == real.merkle_nodes(HEIGHT, count)
        assert real.merkle_nodes(HEIGHT, head >> HEIGHT) != {}
