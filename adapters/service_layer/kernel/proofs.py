"""Consistency proofs between two sealed ledger heads (RFC 9162 §2.1.4), the sealed heads they are between,
and the sealed receipts listed for audit pipelines.

A sealed head is what a ReceiptSealed recorded, or what an exported bundle's receipt statement carries
(predicate.ledger): the tree size (the ledger's head position at the seal), the Merkle root over positions
1..size and the chain digest at that position. The proof is computed from this ledger and checked against
the two roots as given, so a ledger that was rewritten since the older seal fails it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.kernel.canonical import strict_json
from ....domain.kernel.errors import BadInput, NotFound, Refused, VerificationFailed
from ....domain.kernel.merkle import verify_consistency
from ....domain.kernel.streams import run_stream
from .ledger_tree import ledger_tree
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from .ports import LedgerReader

__all__ = ["SealedHead", "is_bundle", "prove_consistency", "sealed_head", "sealed_head_of_bundle",
           "sealed_head_of_run", "sealed_receipts"]

_HEX = frozenset("0123456789abcdef")
MAX_POSITION = 2**53 - 1


@dataclass(frozen=True)
class SealedHead:
    size: int  # the tree size: the ledger's head position at the seal
    root: str  # hex Merkle root over positions 1..size
    head_digest: str  # hex chain digest at position size
    source: str  # what it was read from, for messages: "run r1" or "bundle receipt.jsonl"


def sealed_head(reader: LedgerReader, spec: str) -> SealedHead:
    """A sealed head named on the command line: a bundle file if there is a file of that name, else a run id."""
    path = Path(spec)
    if path.is_file():
        return sealed_head_of_bundle(path)
    return sealed_head_of_run(reader, spec)


def sealed_receipts(reader: LedgerReader) -> Iterator[dict[str, Any]]:
    """Every sealed receipt in ledger order, as `docket export --all --format jsonl` prints them: the run, the
    receipt's digest, the position of its ReceiptSealed, the ledger head and Merkle root it was sealed at,
    and the receipt."""
    from ....domain.events import ReceiptSealed

    for position, _stream, _version, _type, state in reader.events(topics=[ReceiptSealed.type_name()]):
        sealed = json.loads(state)["payload"]
        yield {"run": sealed["run_id"], "receipt_sha256": sealed["receipt_sha256"], "sealed_position": position,
               "ledger_position": sealed["ledger_position"], "ledger_digest": sealed["ledger_digest"],
               "merkle_root": sealed["merkle_root"], "receipt": sealed["receipt"]}


def sealed_head_of_run(reader: LedgerReader, run_id: str) -> SealedHead:
    """The head the run's ReceiptSealed recorded; Refused not-sealed when it has none."""
    found = None
    for sealed in sealed_receipts(reader):
        if sealed["run"] == run_id:
            found = sealed
    if found is None:
        if not reader.has_stream(run_stream(run_id)):
            raise NotFound(Code.RUN_NOT_FOUND, f"no run {run_id} and no bundle file of that name")
        raise Refused(Code.NOT_SEALED, f"run {run_id} has no sealed receipt ('docket seal {run_id}')")
    return SealedHead(found["ledger_position"], found["merkle_root"], found["ledger_digest"], f"run {run_id}")


def is_bundle(text: str) -> bool:
    """Whether a file's text looks like an exported bundle (JSON Lines of DSSE envelopes), not a JSON anchor."""
    first = text.split("\n", 1)[0]
    try:
        value = strict_json(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "payloadType" in value


def sealed_head_of_bundle(path: str | Path) -> SealedHead:
    """The tree size, root and head digest of a bundle's receipt statement (its first line). Its signature is
    not checked (no key is given): the ledger at hand is what they are checked against. BadInput bad-anchor
    when they cannot be read."""
    from ....domain.reports.receipts import PREDICATE_TYPE
    from ...world.ledger import signing

    path = Path(path)
    try:
        envelopes = signing.read_bundle(path)
        statement = strict_json(base64.b64decode(envelopes[0]["payload"], validate=True))
        if statement.get("predicateType") != PREDICATE_TYPE:
            raise BadInput(Code.BAD_ANCHOR, f"the first line of {path.name} is not a docket receipt ({PREDICATE_TYPE})")
        ledger = statement["predicate"]["ledger"]
        size, root, head = ledger["tree_size"], ledger["root"], ledger["head_digest"]
    except VerificationFailed as e:
        raise BadInput(Code.BAD_ANCHOR, e.message) from None
    except (KeyError, TypeError, AttributeError, ValueError, RecursionError, binascii.Error):
        raise BadInput(Code.BAD_ANCHOR, f"{path.name} has no receipt statement with ledger.tree_size, ledger.root and "
                                     "ledger.head_digest on its first line") from None
    if type(size) is not int or not 1 <= size <= MAX_POSITION or not _is_hex64(root) or not _is_hex64(head):
        raise BadInput(Code.BAD_ANCHOR, f"{path.name}: ledger.tree_size must be a whole number from 1, ledger.root and "
                                     "ledger.head_digest 64 lowercase hex digits")
    return SealedHead(size, root, head, f"bundle {path.name}")


def prove_consistency(reader: LedgerReader, old: SealedHead, new: SealedHead) -> dict[str, Any]:
    """The consistency proof from old to new, computed from this ledger and checked against their roots.

    BadInput when old is newer than new; VerificationFailed inconsistent when this ledger does not extend
    old into new (one of them was sealed on a ledger that has since been rewritten, or on another ledger).
    """
    if old.size > new.size:
        raise BadInput(Code.OLD_AFTER_NEW, f"{old.source} was sealed at size {old.size}, after {new.source} "
                                        f"(size {new.size}); give the older one first")
    head = reader.head_position()
    if new.size > head:
        raise VerificationFailed(Code.INCONSISTENT, f"{new.source} was sealed at size {new.size}, but this ledger "
                                                 f"ends at {head}")
    tree = ledger_tree(reader, new.size)
    proof = tree.consistency_proof(old.size)
    doc = {"old_size": old.size, "old_root": old.root, "new_size": new.size, "new_root": new.root,
           "proof": [node.hex() for node in proof]}
    if not verify_consistency(old.size, new.size, bytes.fromhex(old.root), bytes.fromhex(new.root), proof):
        ours = tree.root(old.size).hex(), tree.root().hex()
        differs = [f"{head.source} sealed root {head.root} at size {head.size}, this ledger's is {root}"
                   for head, root in zip((old, new), ours) if head.root != root]
        raise VerificationFailed(Code.INCONSISTENT, "this ledger does not extend " + old.source + " into " + new.source
                                 + (": " + "; ".join(differs) if differs else ""))
    return doc


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX
