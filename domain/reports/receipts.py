"""A sealed receipt, checked offline: from the exported statement alone, with no ledger at hand.

The statement's predicate (docs/receipts.md) holds the receipt, its digest, the
ledger's tree size, Merkle root and head digest, and every event the receipt
cites with the stored bytes of its state, the previous position's chain digest,
its own chain digest and its RFC 9162 audit path. verify_statement recomputes
each digest with the chain's own functions, proves each against the root, proves
the head digest at the last leaf, and checks that the cited events say what the
receipt says. Each failure raises VerificationFailed with its own code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..kernel.canonical import CanonicalJSONError, strict_json
from ..kernel.chain import chain_entry, next_digest
from ..kernel.errors import VerificationFailed
from ..kernel.merkle import verify_inclusion
from ..kernel.codes import Code
from .receipt_statements import (
    CHECK_EVENT_TYPES, FORMATS, _Cited, _Contradictions, _base64, _few, _hex, _integer, _list, _object, _path,
    _shown, receipt_sha256)

__all__ = [
    "CHECK_EVENT_TYPES",
    "FORMAT",
    "FORMATS",
    "PREDICATE_TYPE",
    "VerifiedReceipt",
    "receipt_checks",
    "receipt_sha256",
    "verify_statement",
]

PREDICATE_TYPE = "https://docket.dev/attestation/receipt/v1"
FORMAT = 3  # 2: the repository, the target's foreign commits, a stopped run's own subject; 3: the agents' requests


def receipt_checks(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """Every check result the receipt names, in order: each task's, then each integration step's re-verification."""
    checks = [c for task in receipt["tasks"] for c in task["checks"]]
    return checks + [c for step in receipt["integration"]["steps"] for c in step["checks"]]


@dataclass(frozen=True)
class VerifiedReceipt:
    run_id: str
    final_commit: str
    outcome: dict[str, Any]
    tree_size: int
    root: str
    events_checked: int
    receipt: dict[str, Any]


def verify_statement(statement: dict[str, Any]) -> VerifiedReceipt:
    """The receipt the statement carries, once every check holds; else VerificationFailed naming what failed."""
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise VerificationFailed(Code.BAD_STATEMENT, f"predicateType is not {PREDICATE_TYPE}: not a docket receipt")
    predicate = _object(statement.get("predicate"), "predicate")
    receipt = _object(predicate.get("receipt"), "predicate.receipt")
    try:
        digest = receipt_sha256(receipt)
    except CanonicalJSONError as e:
        raise VerificationFailed(Code.BAD_STATEMENT, f"the receipt is not canonical JSON: {e}") from None
    if predicate.get("receipt_sha256") != digest:
        sealed = _shown(predicate.get("receipt_sha256"))
        raise VerificationFailed(Code.RECEIPT_DIGEST_MISMATCH, f"the receipt's sha256 is {digest}, not the {sealed} it "
                                                            "is sealed with")
    ledger = _object(predicate.get("ledger"), "predicate.ledger")
    size = _integer(ledger.get("tree_size"), "ledger.tree_size")
    root = _hex(ledger.get("root"), "ledger.root")
    head = _hex(ledger.get("head_digest"), "ledger.head_digest")
    events = _list(predicate.get("events"), "predicate.events")
    cited = [_check_event(e, i, size, root) for i, e in enumerate(events)]
    _check_head(ledger.get("head"), head, size, root)
    positions = [c.position for c in cited]
    if positions != receipt.get("cited"):
        raise VerificationFailed(Code.CITED_EVENTS_MISMATCH, f"the events exported (positions {_few(positions)}) are "
                                                          f"not the ones the receipt cites "
                                                          f"({_few(receipt.get('cited'))})")
    try:
        final_commit = _Contradictions(receipt, cited).check(statement)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise VerificationFailed(Code.BAD_STATEMENT, f"the receipt lacks a field or has a wrong type ({e!r})") from None
    return VerifiedReceipt(run_id=receipt["run"]["id"], final_commit=final_commit,
                           outcome=receipt["target"]["outcome"], tree_size=size, root=root,
                           events_checked=len(cited), receipt=receipt)


def _check_head(event: Any, head: str, size: int, root: str) -> None:
    """The head is the event at position tree_size, exported whole: its chain digest hashes its position in, so a
    claimed size is bound to the root (an audit path of the last leaf alone can fit a tree of another size)."""
    try:
        _check_event(event, None, size, root)
    except VerificationFailed as e:
        raise VerificationFailed(Code.HEAD_NOT_PROVEN, f"the ledger head: {e.message}") from None
    if event["position"] != size or event["digest"] != head:
        raise VerificationFailed(Code.HEAD_NOT_PROVEN, f"the head digest {head} is not the digest of the event at "
                                                    f"position {size}, the last of the tree of size {size}")


def _check_event(event: Any, index: int | None, size: int, root: str) -> _Cited:
    where = "ledger.head" if index is None else f"events[{index}]"
    event = _object(event, where)
    position = _integer(event.get("position"), f"{where}.position")
    stream, type_ = event.get("stream"), event.get("type")
    version = _integer(event.get("version"), f"{where}.version")
    if not isinstance(stream, str) or not isinstance(type_, str):
        raise VerificationFailed(Code.BAD_STATEMENT, f"{where} has no stream or type")
    state = _base64(event.get("state"), f"{where}.state")
    previous, digest = _hex(event.get("previous_digest"), f"{where}.previous_digest"), _hex(
        event.get("digest"), f"{where}.digest")
    recomputed = next_digest(previous, chain_entry(position, stream, version, type_, state))
    named = f"the event at position {position} ({_shown(type_)} on {_shown(stream)})"
    if recomputed != digest:
        raise VerificationFailed(Code.EVENT_DIGEST_MISMATCH, f"{named} recomputes to chain digest {recomputed}, not the "
                                                          f"{digest} exported with it")
    if not verify_inclusion(bytes.fromhex(digest), position - 1, size, _path(event.get("audit_path"), where),
                            bytes.fromhex(root)):
        raise VerificationFailed(Code.BAD_PROOF, f"the audit path of {named} does not prove its digest in the tree of "
                                              f"size {size} with root {root}")
    try:
        body = strict_json(state)
        payload = body["payload"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise VerificationFailed(Code.BAD_STATEMENT, f"the state of {named} is not an event's JSON") from None
    if not isinstance(payload, dict):
        raise VerificationFailed(Code.BAD_STATEMENT, f"the state of {named} has no payload object")
    return _Cited(position, type_.rsplit(".v", 1)[0], payload)
