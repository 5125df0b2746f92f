"""The bundle of a sealed run, and its offline check: JSON Lines of DSSE envelopes (docs/receipts.md).

Line 1 is the receipt: an in-toto Statement v1 about the target ref at the final
commit, predicate type domain.receipts.PREDICATE_TYPE, holding the receipt, the
tree size, root and head digest it was sealed at, and every cited event with its
stored state, chain digests and audit path. Then one in-toto test-result
statement per check result the receipt names, in the receipt's order, about
the commit the check ran on. Every line is signed with the same key.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....domain.kernel.chain import GENESIS_DIGEST
from ....domain.kernel.errors import VerificationFailed
from ....domain.reports.receipts import PREDICATE_TYPE, VerifiedReceipt, receipt_checks, verify_statement
from ....domain.reports.receipt_claims import subject_of
from ...world.ledger import signing
from ..kernel.ledger_tree import ledger_tree
from .receipts import Sealed
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from securesystemslib.signer import CryptoSigner, SSlibKey
    from ..kernel.ports import LedgerReader

__all__ = ["BundleSummary", "check_statements", "receipt_bundle", "receipt_statement", "verify_bundle"]

_RESULTS = {"passed": "PASSED", "failed": "FAILED", "timed-out": "FAILED"}


def receipt_statement(reader: LedgerReader, sealed: Sealed) -> dict[str, Any]:
    """The in-toto Statement of a sealed receipt, with every cited event and its proof read from the ledger."""
    event = sealed.event
    tree = ledger_tree(reader, event.ledger_position)
    if tree.root().hex() != event.merkle_root:
        raise VerificationFailed(Code.LEDGER_REWRITTEN, f"the ledger's Merkle root over positions 1..{tree.size} is not "
                                                     f"the {event.merkle_root} sealed at position {sealed.position}; "
                                                     "run 'docket verify'")
    head = event.ledger_position
    rows = {row[0]: row for row in reader.events_at(sorted({*event.cited_positions, head}))}
    for position in (*event.cited_positions, head):
        if position not in rows:
            raise VerificationFailed(Code.LEDGER_CUT, f"the event at position {position} is not in the ledger")

    def proven(position: int) -> dict[str, Any]:
        _, stream, version, type_, state = rows[position]
        return {
            "position": position, "stream": stream, "version": version, "type": type_,
            "state": base64.b64encode(bytes(state)).decode("ascii"),
            "previous_digest": reader.digest_at(position - 1) if position > 1 else GENESIS_DIGEST,
            "digest": reader.digest_at(position),
            "audit_path": [h.hex() for h in tree.inclusion_proof(position - 1)],
        }

    events = [proven(position) for position in event.cited_positions]
    receipt = event.receipt
    predicate = {
        "receipt": receipt,
        "receipt_sha256": event.receipt_sha256,
        "sealed": {"position": sealed.position, "recorded_at": event.recorded_at},
        "ledger": {"tree_size": head, "root": event.merkle_root, "head_digest": event.ledger_digest,
                   "head": proven(head)},
        "events": events,
    }
    name, digest = subject_of(receipt, event.receipt_sha256)  # a stopped run: the run itself, no commit
    return signing.statement(name, digest, PREDICATE_TYPE, predicate)


def check_statements(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """One in-toto test-result statement per check result of the receipt, in its order."""
    made = []
    for check in receipt_checks(receipt):
        result = _RESULTS[check["result"]]
        configuration = [{"name": f"docket check {check['check']}", "digest": {"sha256": check["config_sha256"]}}]
        if check["output_sha256"] is not None:
            configuration.append({"name": f"output of check run {check['check_id']}",
                                  "digest": {"sha256": check["output_sha256"]}})
        tests = check.get("tests")
        failing = [check["check"]] if result == "FAILED" else []
        if tests is not None:  # the report's failing tests: on a PASSED result judged relative to the base, the
            failing = list(tests["failing"]) or failing  # known ones (the receipt cites the base's report too)
            if tests["report_sha256"] is not None:
                configuration.append({"name": f"JUnit report of check run {check['check_id']}, judged "
                                              f"{tests['judge']}", "digest": {"sha256": tests["report_sha256"]}})
        predicate = signing.test_result_predicate(
            result, configuration, passed_tests=[check["check"]] if result == "PASSED" else [],
            failed_tests=failing)
        made.append(signing.statement(f"docket-candidate:{check['binding_id']}", {"gitCommit": check["commit"]},
                                      signing.TEST_RESULT_TYPE, predicate))
    return made


def receipt_bundle(reader: LedgerReader, sealed: Sealed, signer: CryptoSigner) -> list[dict[str, Any]]:
    """The signed envelopes of the bundle, line by line."""
    statement = receipt_statement(reader, sealed)
    return [signing.sign_statement(s, signer)
            for s in (statement, *check_statements(statement["predicate"]["receipt"]))]


@dataclass(frozen=True)
class BundleSummary:
    receipt: VerifiedReceipt
    check_statements: int
    receipt_sha256: str = ""


def verify_bundle(envelopes: list[dict[str, Any]], verifier: SSlibKey) -> BundleSummary:
    """Every line's signature, the receipt's statement (domain.receipts.verify_statement) and each test-result
    line against the check it must state; VerificationFailed naming the line and what failed."""
    if not envelopes:
        raise VerificationFailed(Code.BAD_BUNDLE, "the bundle has no line")
    statement = _line(envelopes[0], 1, verifier)
    try:
        verified = verify_statement(statement)
    except VerificationFailed as e:
        raise VerificationFailed(e.code, f"line 1 (the receipt): {e.message}") from None
    expected = check_statements(verified.receipt)
    if len(envelopes) - 1 != len(expected):
        raise VerificationFailed(Code.BUNDLE_LINES_MISMATCH, f"the bundle has {len(envelopes) - 1} test-result line(s) "
                                                          f"after the receipt; the receipt names {len(expected)} "
                                                          "check result(s)")
    for number, (envelope, wanted) in enumerate(zip(envelopes[1:], expected), start=2):
        if _line(envelope, number, verifier) != wanted:
            check = receipt_checks(verified.receipt)[number - 2]
            raise VerificationFailed(Code.CHECK_STATEMENT_MISMATCH, f"line {number} is not the test result of check "
                                                                 f"{check['check']} (run {check['check_id']}) that "
                                                                 "the receipt names there")
    return BundleSummary(verified, len(expected), statement["predicate"]["receipt_sha256"])


def _line(envelope: dict[str, Any], number: int, verifier: SSlibKey) -> dict[str, Any]:
    try:
        return signing.verify_envelope(envelope, verifier)
    except VerificationFailed as e:
        raise VerificationFailed(e.code, f"line {number}: {e.message}") from None
