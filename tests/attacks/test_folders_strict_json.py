"""Signed and chained JSON with a key given twice: JSON parsers disagree on which one counts (Python's takes the
last, others the first), so docket refuses the object instead of choosing."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from docket.adapters.world.ledger import signing
from docket.domain.kernel.canonical import DuplicateKey, strict_json
from docket.domain.kernel.errors import VerificationFailed

COMMIT = "d20ace7968ba43c0219f62d71334c1095bab1602"


def _signed(tmp_path: Path) -> tuple[dict, object]:
    private, public = signing.generate_key(tmp_path / "docket")
    statement = signing.statement("main", {"gitCommit": COMMIT}, "https://docket.example/receipt/v1", {"run": "r1"})
    return signing.sign_statement(statement, signing.load_signer(private)), signing.load_verifier(public)


def test_strict_json_refuses_a_key_given_twice_at_any_depth():
    assert strict_json('{"a": {"b": 1}, "c": [{"d": 2}]}') == {"a": {"b": 1}, "c": [{"d": 2}]}
    for text in ('{"a": 1, "a": 1}', '{"x": {"b": 1, "b": 2}}', '[{"d": 1, "d": 2}]'):
        with pytest.raises(DuplicateKey):
            strict_json(text)


def test_an_envelope_with_two_payload_members_in_a_bundle_is_refused(tmp_path: Path):
    envelope, verifier = _signed(tmp_path)
    forged = base64.b64encode(b'{"forged":true}').decode("ascii")
    line = json.dumps(envelope, sort_keys=True, separators=(",", ":"))
    twice = line.replace('"payload":', f'"payload":"{forged}","payload":', 1)
    assert json.loads(twice) == envelope  # the last one wins: a lenient reader verifies what the signer signed
    path = tmp_path / "receipt.intoto.jsonl"
    path.write_text(twice + "\n")
    with pytest.raises(VerificationFailed) as failed:
        signing.read_bundle(path)
    assert failed.value.code == "bad-bundle" and "payload" in failed.value.message
    path.write_text(line + "\n")  # the honest bundle still verifies
    assert signing.verify_envelope(signing.read_bundle(path)[0], verifier)["predicate"] == {"run": "r1"}


def test_a_statement_with_a_key_given_twice_is_a_bad_statement_even_when_signed(tmp_path: Path):
    private, public = signing.generate_key(tmp_path / "docket")
    signer, verifier = signing.load_signer(private), signing.load_verifier(public)
    envelope = signing.sign_statement(
        signing.statement("main", {"gitCommit": COMMIT}, "https://docket.example/receipt/v1", {"run": "r1"}), signer)
    payload = base64.b64decode(envelope["payload"])
    doubled = payload.replace(b'"_type":', b'"_type":"x","_type":', 1)
    from securesystemslib.dsse import Envelope

    dsse = Envelope(doubled, envelope["payloadType"], {})
    dsse.sign(signer)
    resigned = dsse.to_dict()
    with pytest.raises(VerificationFailed) as failed:
        signing.verify_envelope(resigned, verifier)
    assert failed.value.code == "bad-statement" and "_type" in failed.value.message
