"""Tampering with an exported receipt: every change is caught by `docket verify-receipt`, and the error names it.

A change to a signed payload breaks its signature first. To reach the deeper
checks the same change is also signed again with the same key, as a forger
holding the key (or the ledger) would: then the cited event's digest, its
audit path, the receipt's digest, the tree size or the receipt's agreement
with its events must catch it.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import random
from pathlib import Path

import pytest

from docket.adapters.service_layer.use_cases.export import verify_bundle
from docket.adapters.world.ledger.signing import load_signer, load_verifier, read_bundle, sign_statement
from docket.cli.app import main
from docket.domain.kernel.errors import DocketError
from docket.domain.reports.receipts import receipt_sha256

from ..conftest import Docket, make_repo
from .receipt_world import RUN, clean_two_tasks, keys


@pytest.fixture(scope="module")
def exported(tmp_path_factory):  # noqa: ANN201
    root = tmp_path_factory.mktemp("tamper")
    repo = make_repo(root / "repo")
    docket = Docket(repo, {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")})
    clean_two_tasks(docket)
    docket("integrate", RUN)
    docket("seal", RUN)
    private, public = keys(docket)
    bundle = root / "bundle.jsonl"
    docket("export", RUN, "--key", str(private), "--out", str(bundle))
    other = root / "other"
    docket("key", "generate", "--out", str(other))
    return {"lines": bundle.read_bytes().splitlines(), "private": private, "public": public,
            "other_public": other.with_suffix(".pub")}


def verify(exported, lines: list[bytes], tmp_path: Path, capsys,  # noqa: ANN001
           key: Path | None = None) -> tuple[int, str]:
    """docket verify-receipt of these lines; (exit code, stderr)."""
    path = tmp_path / f"bundle-{random.random()}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    capsys.readouterr()
    code = main(["verify-receipt", str(path), "--key", str(key or exported["public"])])
    err = capsys.readouterr().err
    assert code == 0 or err.count("\n") == 1, err  # exactly one error line
    return code, err


def statement(line: bytes) -> dict:
    return json.loads(base64.b64decode(json.loads(line)["payload"]))


def resigned(exported, value: dict) -> bytes:  # noqa: ANN001
    envelope = sign_statement(value, load_signer(exported["private"]))
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()


def run_opened(value: dict) -> dict:
    """The cited RunOpened event of a statement (position 1, LedgerCreated, is cited before it from format 2)."""
    return next(e for e in value["predicate"]["events"] if e["type"].startswith("RunOpened"))


def with_receipt(exported, change) -> list[bytes]:  # noqa: ANN001
    """The bundle with line 1's statement changed by change(statement) and signed again with the same key."""
    lines = list(exported["lines"])
    value = copy.deepcopy(statement(lines[0]))
    change(value)
    lines[0] = resigned(exported, value)
    return lines


def failed(result: tuple[int, str], code: str, *words: str) -> None:
    exit_code, err = result
    assert exit_code == 1 and err.startswith(f"docket: error: {code}: "), err
    for word in words:
        assert word in err, err


def test_the_untouched_bundle_verifies(exported, tmp_path, capsys):
    assert verify(exported, exported["lines"], tmp_path, capsys)[0] == 0


def test_one_byte_changed_in_the_signed_statement_breaks_the_signature(exported, tmp_path, capsys):
    lines = list(exported["lines"])
    envelope = json.loads(lines[0])
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[payload.index(b'"goal":"two files"') + 8] ^= 0x01  # "two files" -> "uwo files"
    envelope["payload"] = base64.b64encode(bytes(payload)).decode()
    lines[0] = json.dumps(envelope).encode()
    failed(verify(exported, lines, tmp_path, capsys), "bad-signature", "line 1")


def test_the_signature_itself_changed(exported, tmp_path, capsys):
    lines = list(exported["lines"])
    envelope = json.loads(lines[0])
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[10] ^= 0x80
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    lines[0] = json.dumps(envelope).encode()
    failed(verify(exported, lines, tmp_path, capsys), "bad-signature", "line 1")


def test_a_cited_events_state_changed_and_signed_again(exported, tmp_path, capsys):
    def change(value: dict) -> None:
        event = run_opened(value)
        state = event["state"] = base64.b64decode(event["state"]).replace(b"two files", b"two filez")
        event["state"] = base64.b64encode(state).decode()

    first = run_opened(statement(exported["lines"][0]))["position"]
    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "event-digest-mismatch",
           f"position {first} ('RunOpened.v2'")


def test_a_digest_recomputed_for_a_changed_event_is_not_in_the_tree(exported, tmp_path, capsys):
    from docket.domain.kernel.chain import chain_entry, next_digest

    def change(value: dict) -> None:
        event = run_opened(value)
        state = base64.b64decode(event["state"]).replace(b"two files", b"two filez")
        event["state"] = base64.b64encode(state).decode()
        event["digest"] = next_digest(event["previous_digest"], chain_entry(
            event["position"], event["stream"], event["version"], event["type"], state))

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "bad-proof", "RunOpened.v2")


def test_an_audit_path_hash_changed(exported, tmp_path, capsys):
    def change(value: dict) -> None:
        path = value["predicate"]["events"][3]["audit_path"]
        path[1] = path[1][:-1] + ("0" if path[1][-1] != "0" else "1")

    position = statement(exported["lines"][0])["predicate"]["events"][3]["position"]
    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "bad-proof", f"position {position}")


@pytest.mark.parametrize("delta", [1, -1, 1000])
def test_a_wrong_tree_size(exported, tmp_path, capsys, delta):
    def change(value: dict) -> None:
        value["predicate"]["ledger"]["tree_size"] += delta

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "bad-proof", "tree of size")


def test_a_wrong_head_digest(exported, tmp_path, capsys):
    def change(value: dict) -> None:
        value["predicate"]["ledger"]["head_digest"] = "0" * 64

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "head-not-proven")


def test_a_receipt_field_changed_without_its_digest(exported, tmp_path, capsys):
    def change(value: dict) -> None:
        value["predicate"]["receipt"]["tasks"][0]["title"] = "something else"

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "receipt-digest-mismatch")


@pytest.mark.parametrize(("field", "words"), [
    (("tasks", 0, "title"), ["task t1"]),
    (("tasks", 1, "candidate", "commit"), ["CandidatePinned", "task t2's candidate", "commit"]),
    (("tasks", 0, "checks", 0, "output_sha256"), ["check ok", "output_sha256"]),
    (("integration", "steps", 1, "merge_commit"), ["IntegrationStepMerged", "integration step 2"]),
    (("run", "base_commit"), ["RunBasePinned"]),
])
def test_a_receipt_field_changed_with_its_digest_contradicts_the_cited_event(exported, tmp_path, capsys, field,
                                                                               words):
    def change(value: dict) -> None:
        receipt = value["predicate"]["receipt"]
        *parents, last = field
        holder = receipt
        for part in parents:
            holder = holder[part]
        holder[last] = "f" * len(holder[last])
        value["predicate"]["receipt_sha256"] = receipt_sha256(receipt)

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "receipt-contradicts-event", *words)


def test_the_final_commit_changed_everywhere_but_in_the_ledger(exported, tmp_path, capsys):
    forged = "e" * 40

    def change(value: dict) -> None:
        receipt = value["predicate"]["receipt"]
        receipt["target"]["final_commit"] = forged
        value["predicate"]["receipt_sha256"] = receipt_sha256(receipt)
        value["subject"][0]["digest"]["gitCommit"] = forged

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "receipt-contradicts-event",
           "IntegrationCompleted")


def test_a_cited_event_left_out(exported, tmp_path, capsys):
    def change(value: dict) -> None:
        del value["predicate"]["events"][2]

    failed(verify(exported, with_receipt(exported, change), tmp_path, capsys), "cited-events-mismatch")


def test_a_test_result_line_changed(exported, tmp_path, capsys):
    lines = list(exported["lines"])
    envelope = json.loads(lines[2])
    envelope["payload"] = base64.b64encode(base64.b64decode(envelope["payload"]).replace(
        b'"PASSED"', b'"FAILED"')).decode()
    failed(verify(exported, [*lines[:2], json.dumps(envelope).encode(), *lines[3:]], tmp_path, capsys),
           "bad-signature", "line 3")
    value = statement(lines[2])
    value["predicate"]["result"] = "FAILED"
    lines[2] = resigned(exported, value)
    failed(verify(exported, lines, tmp_path, capsys), "check-statement-mismatch", "line 3", "check ok")


def test_a_line_removed_or_the_lines_reordered(exported, tmp_path, capsys):
    lines = exported["lines"]
    failed(verify(exported, lines[:-1], tmp_path, capsys), "bundle-lines-mismatch", "3 test-result line(s)")
    failed(verify(exported, [lines[0], lines[2], lines[1], *lines[3:]], tmp_path, capsys),
           "check-statement-mismatch", "line 2")
    failed(verify(exported, [lines[1], lines[0], *lines[2:]], tmp_path, capsys), "bad-statement", "line 1",
           "not a docket receipt")


def test_the_wrong_public_key(exported, tmp_path, capsys):
    failed(verify(exported, exported["lines"], tmp_path, capsys, key=exported["other_public"]), "wrong-key",
           "line 1")


def test_any_one_byte_changed_anywhere_in_the_file_fails(exported, tmp_path):
    data = b"".join(line + b"\n" for line in exported["lines"])
    verifier = load_verifier(exported["public"])
    picks = random.Random(9162).sample(range(len(data)), 150)
    for offset in picks:
        changed = bytearray(data)
        changed[offset] = (changed[offset] + 1) % 256 if changed[offset] != ord("\n") else ord(" ")
        path = tmp_path / "changed.jsonl"
        path.write_bytes(bytes(changed))
        with pytest.raises(DocketError):
            verify_bundle(read_bundle(path), verifier)
        path.unlink()


def test_a_workers_sandbox_claimed_wider_or_narrower_than_recorded_contradicts_its_launch(exported, tmp_path, capsys):
    generations = [g for task in statement(exported["lines"][0])["predicate"]["receipt"]["tasks"]
                   for g in task["generations"]]
    assert generations and all(g["sandbox"]["enforced"] for g in generations)  # recorded by each launch, cited

    def claim(key: str, value: object):  # noqa: ANN202
        def change(statement_value: dict) -> None:
            receipt = statement_value["predicate"]["receipt"]
            receipt["tasks"][0]["generations"][0]["sandbox"][key] = value
            statement_value["predicate"]["receipt_sha256"] = receipt_sha256(receipt)
        return change

    for key, value in (("write_roots", []), ("network", "none"), ("enforced", False), ("policy_sha256", "0" * 64)):
        failed(verify(exported, with_receipt(exported, claim(key, value)), tmp_path, capsys),
               "receipt-contradicts-event", "was not sandboxed as the receipt says")
