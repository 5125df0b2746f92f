"""Receipts through the real CLI: integrate, seal once, export a signed bundle, verify it with no ledger at hand."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import git
from .receipt_world import RUN, clean_two_tasks, conflicting_two_tasks, keys, planned_run

DOCS = Path(__file__).resolve().parents[2] / "docs" / "receipts.md"


def statements(path) -> list[dict]:  # noqa: ANN001
    return [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in path.read_text().splitlines()]


def verify_elsewhere(docket, bundle, public, *args: str) -> subprocess.CompletedProcess:  # noqa: ANN001
    """docket verify-receipt in an empty folder outside any repository, with no ledger anywhere."""
    empty = docket.cwd.parent / "auditor"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in docket.env.items() if not k.startswith("DOCKET_")}
    done = subprocess.run([sys.executable, "-m", "docket", "verify-receipt", str(bundle), "--key", str(public), *args],
                          cwd=empty, env={**env, "GIT_CEILING_DIRECTORIES": str(empty.parent)},
                          capture_output=True, text=True, timeout=120)
    assert list(empty.iterdir()) == []  # nothing created there: no ledger, no views
    return done


def test_two_clean_tasks_integrate_seal_once_export_and_verify_offline(docket):
    candidates = clean_two_tasks(docket)
    integrated = docket("integrate", RUN, "--json").json()
    assert integrated["status"] == "completed"
    final = git(docket.cwd, "rev-parse", "refs/heads/release")
    assert integrated["final_commit"] == final

    sealed = docket("seal", RUN, "--json").json()
    again = docket("seal", RUN, "--json").json()
    assert sealed["sealed_now"] and not again["sealed_now"]
    assert again["receipt_sha256"] == sealed["receipt_sha256"] and again["position"] == sealed["position"]
    assert len(docket("log", "--json", "--type", "ReceiptSealed.v1").json()["events"]) == 1
    receipt = sealed["receipt"]
    assert receipt["target"]["final_commit"] == final and receipt["target"]["outcome"]["status"] == "completed"
    assert [t["task_id"] for t in receipt["tasks"]] == ["t1", "t2"]
    assert [t["candidate"]["commit"] for t in receipt["tasks"]] == [candidates["t1"]["commit"],
                                                                    candidates["t2"]["commit"]]
    assert [s["status"] for s in receipt["integration"]["steps"]] == ["verified", "verified"]
    assert max(receipt["cited"]) <= sealed["ledger_position"] < sealed["position"]

    private, public = keys(docket)
    bundle = docket.cwd.parent / "r1.intoto.jsonl"
    exported = docket("export", RUN, "--key", str(private), "--out", str(bundle), "--json").json()
    assert exported["lines"] == 5  # the receipt, then 2 tasks' checks and 2 steps' re-verifications
    receipt_statement, *tests = statements(bundle)
    assert receipt_statement["subject"] == [{"name": "refs/heads/release", "digest": {"gitCommit": final}}]
    assert receipt_statement["predicateType"] == "https://docket.dev/attestation/receipt/v1"
    assert receipt_statement["predicate"]["receipt_sha256"] == sealed["receipt_sha256"]
    assert [t["predicateType"] for t in tests] == ["https://in-toto.io/attestation/test-result/v0.1"] * 4
    assert tests[0]["subject"][0]["digest"] == {"gitCommit": candidates["t1"]["commit"]}

    done = verify_elsewhere(docket, bundle, public, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["run_id"], summary["final_commit"], summary["tree_size"]) == (RUN, final,
                                                                                 sealed["ledger_position"])
    assert summary["events_checked"] == len(receipt["cited"]) and summary["check_statements"] == 4
    human = verify_elsewhere(docket, bundle, public)
    assert human.returncode == 0 and human.stdout.startswith(f"ok: run {RUN}, integration completed")

    script = docket.cwd.parent / "by-hand" / "verify.py"
    script.parent.mkdir()
    script.write_text(DOCS.read_text().split("```python\n", 1)[1].split("```", 1)[0])
    by_hand = subprocess.run([sys.executable, str(script), str(bundle), str(public)], cwd=script.parent,
                             capture_output=True, text=True, timeout=120)
    assert by_hand.returncode == 0 and by_hand.stdout == f"ok {RUN} {final}\n", by_hand.stderr
    forged = docket.cwd.parent / "forged.jsonl"
    forged.write_text(bundle.read_text().replace('"payload":"eyJ', '"payload":"eyK', 1))
    by_hand = subprocess.run([sys.executable, str(script), str(forged), str(public)], cwd=script.parent,
                             capture_output=True, text=True, timeout=120)
    assert by_hand.returncode != 0

    refused = docket("export", RUN, "--key", str(private), "--out", str(bundle), check=False)
    assert refused.returncode == 3 and "docket: error: output-exists:" in refused.stderr
    assert statements(bundle)[0] == receipt_statement  # never overwritten


def test_a_stopped_integration_is_sealed_at_the_commit_the_target_still_names(docket):
    conflicting_two_tasks(docket)
    expected = git(docket.cwd, "rev-parse", "refs/heads/release")
    stopped = docket("integrate", RUN, check=False)
    assert stopped.returncode == 3, stopped.stderr
    sealed = docket("seal", RUN, "--json").json()
    target = sealed["receipt"]["target"]
    assert target["outcome"] == {"status": "stopped", "code": "conflicted", "step": 2}
    assert (target["final_commit"], target["expected_commit"], target["final_tree"]) == (expected, expected, None)
    assert [s["status"] for s in sealed["receipt"]["integration"]["steps"]] == ["verified", "conflicted"]
    private, public = keys(docket)
    bundle = docket.cwd.parent / "stopped.jsonl"
    docket("export", RUN, "--key", str(private), "--out", str(bundle))
    # nothing was delivered: the statement is about the run, never about a commit docket did not verify
    assert statements(bundle)[0]["subject"] == [{"name": f"docket-run:{RUN}",
                                                 "digest": {"sha256": sealed["receipt_sha256"]}}]
    done = verify_elsewhere(docket, bundle, public, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"]["code"] == "conflicted"
    asked = verify_elsewhere(docket, bundle, public, "--commit", expected)
    assert asked.returncode == 1 and asked.stderr.startswith("docket: error: receipt-for-another-commit: the "
                                                             "receipt's run stopped and vouches for no commit")

    with sqlite3.connect(docket.ledger) as conn:  # a digest below the seal rewritten behind docket's back
        conn.execute("UPDATE chain SET digest = ? WHERE position = 3", ("0" * 64,))
    conn.close()
    rewritten = docket("export", RUN, "--key", str(private), "--out", str(bundle.with_name("again.jsonl")),
                       check=False)
    assert rewritten.returncode == 1 and rewritten.stderr.startswith("docket: error: ledger-rewritten:")
    assert not bundle.with_name("again.jsonl").exists()


def test_a_run_is_sealed_only_after_its_integration_and_exported_only_once_sealed(docket):
    clean_two_tasks(docket)
    early = docket("seal", RUN, check=False)
    assert early.returncode == 3 and early.stderr.startswith("docket: error: not-integrated:")
    private, _ = keys(docket)
    unsealed = docket("export", RUN, "--key", str(private), "--out", str(docket.cwd.parent / "x.jsonl"), check=False)
    assert unsealed.returncode == 3 and unsealed.stderr.startswith("docket: error: not-sealed:")
    assert not (docket.cwd.parent / "x.jsonl").exists()
    unknown = docket("seal", "nope", check=False)
    assert unknown.returncode == 5 and "run-not-found" in unknown.stderr
    assert docket("log", "--json", "--type", "ReceiptSealed.v1").json()["events"] == []


def test_verify_receipt_of_unreadable_input_says_so(docket, tmp_path):
    _, public = keys(docket)
    missing = verify_elsewhere(docket, tmp_path / "none.jsonl", public)
    assert missing.returncode == 5 and missing.stderr.startswith("docket: error: bundle-not-found:")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")
    bad = verify_elsewhere(docket, garbage, public)
    assert bad.returncode == 1 and bad.stderr.startswith("docket: error: bad-bundle: line 1")
    assert bad.stderr.count("\n") == 1


SEAL_POINTS = ["seal:before-record", "store:before-commit", "projection:before-commit"]


@pytest.mark.parametrize("point", SEAL_POINTS)
def test_a_crash_while_sealing_leaves_one_receipt_after_sealing_again(docket, point):
    clean_two_tasks(docket)
    docket("integrate", RUN)
    crashed = docket("seal", RUN, fault=point)
    assert crashed.returncode == -9, crashed.stderr
    recorded = docket("log", "--json", "--type", "ReceiptSealed.v1").json()["events"]
    assert len(recorded) == (0 if point != "projection:before-commit" else 1)
    sealed = docket("seal", RUN, "--json").json()
    assert sealed["sealed_now"] == (point != "projection:before-commit")
    (event,) = docket("log", "--json", "--type", "ReceiptSealed.v1").json()["events"]
    assert event["payload"]["receipt_sha256"] == sealed["receipt_sha256"]
    docket("verify")


def test_a_step_rejected_on_its_merged_tree_and_approvals_are_in_the_receipt(docket):
    only_one = '["sh", "-c", "test ! -f one.txt || test ! -f two.txt"]'  # passes alone, fails merged
    planned_run(docket, {"t1": "echo one > one.txt", "t2": "echo two > two.txt"},
                f"[checks.ok]\ncommand = {only_one}\n[integration]\napproval = true\n")
    waiting = docket("integrate", RUN, check=False)
    assert waiting.returncode == 3 and "awaiting-approval" in waiting.stderr
    docket("approve", RUN, "--by", "alice")
    assert docket("integrate", RUN, check=False).returncode == 3
    sealed = docket("seal", RUN, "--json").json()
    receipt = sealed["receipt"]
    assert receipt["target"]["outcome"]["status"] == "stopped" and receipt["target"]["outcome"]["step"] == 2
    assert [s["status"] for s in receipt["integration"]["steps"]] == ["verified", "rejected"]
    assert receipt["integration"]["steps"][1]["checks"][0]["result"] == "failed"
    assert receipt["integration"]["approved_by"] == ["alice"]
    assert [t["approval"]["by"] for t in receipt["tasks"]] == [["alice"], ["alice"]]
    private, public = keys(docket)
    bundle = docket.cwd.parent / "rejected.jsonl"
    docket("export", RUN, "--key", str(private), "--out", str(bundle))
    assert [s["predicate"]["result"] for s in statements(bundle)[1:]] == ["PASSED", "PASSED", "PASSED", "FAILED"]
    done = verify_elsewhere(docket, bundle, public, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == receipt["target"]["outcome"]


def test_a_task_the_integration_did_not_deliver_is_named_in_the_receipt(docket, tmp_path):
    planned_run(docket, {"t1": "echo one > one.txt"})
    docket("task", "plan", RUN, "--title", "make t2", "--id", "t2")  # never worked on: nothing to hand off
    integrated = docket("integrate", RUN, "--json").json()
    assert integrated["skipped"] == ["t2"]
    receipt = docket("seal", RUN, "--json").json()["receipt"]
    assert [t["task_id"] for t in receipt["tasks"]] == ["t1"]
    assert receipt["undelivered"] == [{"task_id": "t2", "title": "make t2"}]
    private, public = keys(docket)
    bundle = tmp_path / "b.jsonl"
    docket("export", RUN, "--key", str(private), "--out", str(bundle))
    done = verify_elsewhere(docket, bundle, public)
    assert done.returncode == 0, done.stderr
