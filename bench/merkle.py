"""merkle: building the RFC 9162 tree over a million chain digests, against the hashing it cannot avoid.

The tree of n leaves costs 2n - 1 SHA-256 calls (n leaf hashes, n - 1 node hashes), whatever the code
around them; Tree makes all but the root's few right-border ones when it is built.
Each round, interleaved, over the same 1,000,000 digests (100,000 in quick mode):

- tree: ``Tree(digests)``, every level kept (32 bytes a node) to answer proofs;
- floor: the same hashes in a bare list comprehension per level, the inputs prepared beforehand,
  nothing kept.

Goal: the tree within 1.5x of the floor (ratio tree / floor <= 1.5). For information: the tree's absolute
time (the receipt issue's seal + export must stay under 3 s on a 1,000,000-event ledger), and 1,000
inclusion proofs asked of it and verified.

    python -m bench.merkle [--quick]
"""

from __future__ import annotations

import hashlib
import sys
import time

from .common import Row, interleaved, median, spread, table

from docket.domain.kernel.merkle import Tree, verify_inclusion

GOAL = 1.5


def floor(leaf_inputs: list[bytes], node_inputs: list[list[bytes]]) -> None:
    sha256 = hashlib.sha256
    [sha256(data).digest() for data in leaf_inputs]
    for level in node_inputs:
        [sha256(data).digest() for data in level]


def run(quick: bool) -> list[Row]:
    n = 100_000 if quick else 1_000_000
    digests = [hashlib.sha256(b"position %d" % i).digest() for i in range(1, n + 1)]
    leaf_inputs = [b"\x00" + d for d in digests]
    node_inputs, width = [], n
    while width > 1:  # as many inputs per level as Tree hashes there (their content does not matter)
        node_inputs.append([b"\x01" + d + d for d in digests[:width // 2]])
        width //= 2

    times = interleaved({"tree": lambda: Tree(digests), "floor": lambda: floor(leaf_inputs, node_inputs)},
                        rounds=3 if quick else 5)
    tree_s, floor_s = median(times["tree"]), median(times["floor"])

    tree = Tree(digests)
    root = tree.root()
    t0 = time.perf_counter()
    for index in range(0, n, n // 1000):
        assert verify_inclusion(digests[index], index, n, tree.inclusion_proof(index), root)
    proofs_s = time.perf_counter() - t0

    ratio = tree_s / floor_s
    return [
        Row("merkle", f"bare 2n-1 SHA-256, n = {n:,} ({spread(times['floor'])})", floor_s, "s"),
        Row("merkle", f"Tree(digests), n = {n:,} ({spread(times['tree'])})", tree_s, "s", ratio=ratio,
            goal=f"tree / bare <= {GOAL}", passed=ratio <= GOAL),
        Row("merkle", f"1,000 inclusion proofs asked and verified, n = {n:,}", proofs_s, "s", goal="(info)"),
    ]


if __name__ == "__main__":
    print(table(run("--quick" in sys.argv)))
