"""domain.receipts.verify_statement over statements built here, in memory: a small ledger of stored states chained
with domain.chain, a Merkle tree over its digests, and a receipt of a run whose target moved (no tasks reached)."""

from __future__ import annotations

import base64
import copy
import hashlib

import pytest

from docket.domain.kernel.canonical import canonical_json
from docket.domain.kernel.chain import GENESIS_DIGEST, chain_entry, next_digest
from docket.domain.kernel.errors import VerificationFailed
from docket.domain.kernel.merkle import Tree
from docket.domain.reports.receipts import PREDICATE_TYPE, receipt_checks, receipt_sha256, verify_statement

T0 = "2026-01-01T00:00:00.000Z"
BASE, MOVED = "a" * 40, "b" * 40
CITED_EVENTS = [
    ("run:r1", 1, "RunOpened.v1", {"run_id": "r1", "goal": "ship it", "target_branch": "release", "budget_ms": None}),
    ("run:r1", 3, "RunBasePinned.v1", {"intent_id": "i1", "run_id": "r1", "commit": BASE, "result": "observed"}),
    ("task:t3", 1, "TaskPlanned.v1", {"run_id": "r1", "task_id": "t3", "title": "make t3"}),
    ("integration:r1", 1, "IntegrationPrepared.v1", {
        "run_id": "r1", "target_branch": "release", "target_ref": "refs/heads/release", "expected_commit": BASE,
        "approved_by": [], "overlaps": [], "steps": []}),
    ("integration:r1", 5, "IntegrationTargetMoved.v1", {
        "intent_id": "i9", "run_id": "r1", "target_ref": "refs/heads/release", "expected_commit": BASE,
        "found": MOVED, "code": "target-moved", "message": "moved"}),
]


def receipt() -> dict:
    return {
        "format": 1,
        "run": {"id": "r1", "goal": "ship it", "goal_sha256": hashlib.sha256(b"ship it").hexdigest(),
                "base_commit": BASE, "target_branch": "release"},
        "target": {"ref": "refs/heads/release", "expected_commit": BASE, "final_commit": BASE, "final_tree": None,
                   "outcome": {"status": "stopped", "code": "target-moved", "step": None}},
        "tasks": [],
        "undelivered": [{"task_id": "t3", "title": "make t3"}],
        "integration": {"steps": [], "overlaps": [], "approved_by": []},
        "cited": [],
    }


def made(fillers: int = 3, extra: int = 2) -> dict:
    """A statement: `fillers` other events before each cited one, `extra` after the last."""
    rows = []
    for stream, version, type_, payload in CITED_EVENTS:
        rows += [("other", len(rows) + 1, "Noise.v1", {"n": len(rows)}) for _ in range(fillers)]
        rows.append((stream, version, type_, payload))
    rows += [("other", len(rows) + 1, "Noise.v1", {"n": len(rows)}) for _ in range(extra)]
    digests, previous, events, heads = [], GENESIS_DIGEST, [], []
    for position, (stream, version, type_, payload) in enumerate(rows, start=1):
        state = canonical_json({"payload": payload, "recorded_at": T0})
        digest = next_digest(previous, chain_entry(position, stream, version, type_, state))
        if type_ != "Noise.v1" or position == len(rows):
            (events if type_ != "Noise.v1" else heads).append({
                "position": position, "stream": stream, "version": version, "type": type_,
                "state": base64.b64encode(state).decode(), "previous_digest": previous, "digest": digest})
        digests.append(digest)
        previous = digest
    tree = Tree(bytes.fromhex(d) for d in digests)
    if not heads:  # the last cited event is the head
        heads.append(dict(events[-1]))
    for event in events + heads:
        event["audit_path"] = [h.hex() for h in tree.inclusion_proof(event["position"] - 1)]
    r = receipt()
    r["cited"] = [e["position"] for e in events]
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "refs/heads/release", "digest": {"gitCommit": BASE}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"receipt": r, "receipt_sha256": receipt_sha256(r), "sealed": {"position": len(rows) + 1,
                                                                                    "recorded_at": T0},
                      "ledger": {"tree_size": tree.size, "root": tree.root().hex(), "head_digest": digests[-1],
                                 "head": heads[0]},
                      "events": events},
    }


def code_of(statement: dict) -> str:
    with pytest.raises(VerificationFailed) as caught:
        verify_statement(statement)
    return caught.value.code


@pytest.mark.parametrize(("fillers", "extra"), [(0, 0), (0, 1), (1, 0), (3, 2), (7, 9), (15, 1), (16, 0)])
def test_a_consistent_statement_verifies_at_every_tree_shape(fillers, extra):
    statement = made(fillers, extra)
    verified = verify_statement(statement)
    assert (verified.run_id, verified.final_commit, verified.events_checked) == ("r1", BASE, len(CITED_EVENTS))
    assert verified.tree_size == len(CITED_EVENTS) * (fillers + 1) + extra
    assert verified.outcome == {"status": "stopped", "code": "target-moved", "step": None}


def test_the_receipt_digest_is_the_sha256_of_its_canonical_json():
    r = receipt()
    assert receipt_sha256(r) == hashlib.sha256(canonical_json(r)).hexdigest()
    statement = made()
    statement["predicate"]["receipt"]["run"]["goal"] = "ship it!"
    assert code_of(statement) == "receipt-digest-mismatch"
    statement["predicate"]["receipt"]["run"]["extra"] = 1.5  # no floats in a receipt
    assert code_of(statement) == "bad-statement"


def test_every_event_and_every_proof_is_checked():
    for index in range(len(CITED_EVENTS)):
        statement = made()
        event = statement["predicate"]["events"][index]
        event["digest"] = "0" * 64
        assert code_of(statement) == "event-digest-mismatch"
        statement = made()
        event = statement["predicate"]["events"][index]
        event["previous_digest"] = "1" * 64  # recomputes to another digest than the one exported
        assert code_of(statement) == "event-digest-mismatch"
        for hop in range(len(event["audit_path"])):
            statement = made()
            path = statement["predicate"]["events"][index]["audit_path"]
            path[hop] = hashlib.sha256(path[hop].encode()).hexdigest()
            assert code_of(statement) == "bad-proof"
        statement = made()
        statement["predicate"]["events"][index]["audit_path"].append("0" * 64)
        assert code_of(statement) == "bad-proof"


def test_the_tree_size_root_and_head_are_bound_together():
    # An audit path can have the same shape in a tree of another size (see test_merkle), so a wrong size may
    # still prove the cited events, and even the head's path; the head event's chain digest, which hashes its
    # position in, never does.
    codes = set()
    for fillers, extra in ((3, 2), (0, 0), (7, 9)):
        for size_change in (-1, 1, 2, 5, -3):
            statement = made(fillers, extra)
            statement["predicate"]["ledger"]["tree_size"] += size_change
            codes.add(code_of(statement))
    assert codes == {"bad-proof", "head-not-proven"}
    statement = made()
    statement["predicate"]["ledger"]["root"] = "2" * 64
    assert code_of(statement) == "bad-proof"
    statement = made()
    statement["predicate"]["ledger"]["head_digest"] = statement["predicate"]["events"][-1]["digest"]
    assert code_of(statement) == "head-not-proven"
    statement = made()
    statement["predicate"]["ledger"]["head"]["audit_path"] = []
    assert code_of(statement) == "head-not-proven"
    statement = made()
    statement["predicate"]["ledger"]["head"]["state"] = statement["predicate"]["events"][0]["state"]
    assert code_of(statement) == "head-not-proven"


def test_the_cited_positions_are_exactly_the_exported_events():
    statement = made()
    statement["predicate"]["events"].pop(1)
    assert code_of(statement) == "cited-events-mismatch"


@pytest.mark.parametrize("change", [
    lambda r: r["run"].update(goal_sha256="0" * 64),
    lambda r: r["run"].update(base_commit="c" * 40),
    lambda r: r["run"].update(target_branch="main"),
    lambda r: r["target"].update(expected_commit="c" * 40, final_commit="c" * 40),
    lambda r: r["target"].update(final_commit="c" * 40),
    lambda r: r["target"]["outcome"].update(code="target-checked-out"),
    lambda r: r["target"]["outcome"].update(status="completed", code=None),
    lambda r: r["integration"].update(approved_by=["mallory"]),
    lambda r: r["integration"].update(overlaps=[{"first_task": "t1", "second_task": "t2", "paths": ["a"]}]),
    lambda r: r["undelivered"][0].update(title="made t3"),
    lambda r: r["undelivered"].append({"task_id": "t9", "title": "never planned"}),
])
def test_a_receipt_that_says_other_than_its_events_is_refused(change):
    statement = made()
    r = copy.deepcopy(statement["predicate"]["receipt"])
    change(r)
    statement["predicate"]["receipt"] = r
    statement["predicate"]["receipt_sha256"] = receipt_sha256(r)
    assert code_of(statement) == "receipt-contradicts-event"


def test_the_subject_must_be_the_receipts_target():
    statement = made()
    statement["subject"][0]["digest"]["gitCommit"] = MOVED
    assert code_of(statement) == "receipt-contradicts-event"


@pytest.mark.parametrize(("change", "code"), [
    (lambda s: s.update(predicateType="https://in-toto.io/attestation/test-result/v0.1"), "bad-statement"),
    (lambda s: s.update(predicate=[]), "bad-statement"),
    (lambda s: s["predicate"].update(ledger={"tree_size": 0}), "bad-statement"),
    (lambda s: s["predicate"]["ledger"].update(root="ABC"), "bad-statement"),
    (lambda s: s["predicate"]["events"][0].update(state="not base64!"), "bad-statement"),
    (lambda s: s["predicate"]["events"][0].update(audit_path="deadbeef"), "bad-proof"),
    (lambda s: s["predicate"]["events"][0].update(position=True), "bad-statement"),
    (lambda s: s["subject"].append(s["subject"][0]), "bad-statement"),
    (lambda s: s["predicate"]["receipt"].pop("tasks"), "receipt-digest-mismatch"),
])
def test_malformed_statements_are_named(change, code):
    statement = made()
    change(statement)
    assert code_of(statement) == code


def test_receipt_checks_lists_the_tasks_checks_then_the_steps():
    r = receipt()
    r["tasks"] = [{"checks": [{"check_id": "a"}, {"check_id": "b"}]}, {"checks": [{"check_id": "c"}]}]
    r["integration"]["steps"] = [{"checks": [{"check_id": "d"}]}]
    assert [c["check_id"] for c in receipt_checks(r)] == ["a", "b", "c", "d"]
