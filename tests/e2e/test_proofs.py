"""Consistency proofs between sealed heads, receipts as anchors for verify, and every sealed receipt listed,
through the real CLI."""

from __future__ import annotations

import json
import sqlite3

from docket.domain.kernel.chain import GENESIS_DIGEST, chain_entry, next_digest
from docket.domain.kernel.merkle import verify_consistency

from ..conftest import git
from .receipt_world import RUN, clean_two_tasks, keys


def _second_sealed_run(docket) -> None:  # noqa: ANN001
    """Run r2, one task, integrated into its own branch and sealed after r1: the ledger grew in between."""
    git(docket.cwd, "branch", "release2")
    docket("run", "open", "--target", "release2", "--goal", "one more file", "--id", "r2")
    docket("task", "plan", "r2", "--title", "make t3", "--id", "t3")
    candidate = docket("worker", "launch", "r2", "--task", "t3", "--json", "--", "sh", "-c",
                       "echo three > three.txt").json()["pin"]["candidate"]
    docket("check", "run", candidate["binding_id"], "--check", "ok")
    docket("handoff", "offer", candidate["binding_id"])
    docket("integrate", "r2")
    docket("seal", "r2")


def _two_sealed_runs(docket):  # noqa: ANN001, ANN202
    clean_two_tasks(docket)
    docket("integrate", RUN)
    first = docket("seal", RUN, "--json").json()
    private, _public = keys(docket)
    bundle = docket.cwd.parent / "r1.intoto.jsonl"
    docket("export", RUN, "--key", str(private), "--out", str(bundle))
    _second_sealed_run(docket)
    second = docket("seal", "r2", "--json").json()
    return first, second, bundle


def _rewrite_from(ledger, position: int) -> None:  # noqa: ANN001
    """Change the event at position and chain every digest from there again, as a forger with sqlite3 would:
    the chain stays whole, only anchors and sealed roots can tell."""
    with sqlite3.connect(ledger) as conn:
        rows = conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                            "WHERE rowid >= ? ORDER BY rowid", (position,)).fetchall()
        digest = conn.execute("SELECT digest FROM chain WHERE position = ?", (position - 1,)).fetchone()
        digest = digest[0] if digest else GENESIS_DIGEST
        for rowid, stream, version, topic, state in rows:
            if rowid == position:
                state = bytes(state).replace(b'"goal":"two files"', b'"goal":"two fileZ"')
                assert state != rows[0][4]
                conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (state, rowid))
            digest = next_digest(digest, chain_entry(rowid, stream, version, topic, bytes(state)))
            conn.execute("UPDATE chain SET digest = ? WHERE position = ?", (digest, rowid))
    conn.close()


def _run_opened_position(docket) -> int:  # noqa: ANN001
    (event,) = [e for e in docket("log", "--json", "--type", "RunOpened.v2").json()["events"]
                if e["stream"] == f"run:{RUN}"]
    return event["position"]


def test_prove_consistency_between_two_sealed_runs_and_their_bundles(docket):
    first, second, bundle = _two_sealed_runs(docket)
    proved = docket("prove-consistency", RUN, "r2", "--json").json()
    assert proved["ok"] and (proved["old_size"], proved["new_size"]) == (first["ledger_position"],
                                                                         second["ledger_position"])
    assert (proved["old_root"], proved["new_root"]) == (first["merkle_root"], second["merkle_root"])
    assert verify_consistency(proved["old_size"], proved["new_size"], bytes.fromhex(proved["old_root"]),
                              bytes.fromhex(proved["new_root"]), [bytes.fromhex(h) for h in proved["proof"]])
    assert docket("prove-consistency", str(bundle), "r2", "--json").json()["proof"] == proved["proof"]
    same = docket("prove-consistency", RUN, str(bundle), "--json").json()
    assert same["proof"] == [] and same["old_size"] == same["new_size"]
    assert "consistent: size" in docket("prove-consistency", RUN, "r2").stdout

    listed = [json.loads(line) for line in docket("export", "--all", "--format", "jsonl").stdout.splitlines()]
    assert [(r["run"], r["receipt_sha256"], r["ledger_position"], r["merkle_root"]) for r in listed] == [
        (s["run_id"], s["receipt_sha256"], s["ledger_position"], s["merkle_root"]) for s in (first, second)]
    assert listed[0]["receipt"] == first["receipt"] and listed[1]["sealed_position"] == second["position"]
    assert docket("export", RUN, "--all", check=False).returncode == 2

    backwards = docket("prove-consistency", "r2", RUN, check=False)
    assert backwards.returncode == 2 and backwards.stderr.startswith("docket: error: old-after-new: ")
    garbage = docket.cwd.parent / "garbage.jsonl"
    garbage.write_text('{"payloadType": "x", "payload": "!!"}\n')
    unreadable = docket("prove-consistency", str(garbage), "r2", check=False)
    assert unreadable.returncode == 2 and unreadable.stderr.startswith("docket: error: bad-anchor: ")


def test_a_rewritten_ledger_is_inconsistent_with_what_was_sealed_and_fails_the_receipt_anchor(docket):
    first, _second, bundle = _two_sealed_runs(docket)
    anchored = docket("verify", "--anchor", str(bundle), "--json").json()
    assert anchored["ok"] and anchored["anchor"] == {"position": first["ledger_position"],
                                                     "digest": first["ledger_digest"],
                                                     "merkle_root": first["merkle_root"]}

    _rewrite_from(docket.ledger, _run_opened_position(docket))
    assert docket("verify", "--json").json()["ok"]  # the forged chain is whole: only what was sealed tells
    inconsistent = docket("prove-consistency", RUN, "r2", check=False)
    assert inconsistent.returncode == 1 and inconsistent.stderr.startswith("docket: error: inconsistent: ")
    assert f"run {RUN} sealed root {first['merkle_root']}" in inconsistent.stderr
    tampered = docket("verify", "--anchor", str(bundle), check=False)
    assert tampered.returncode == 1 and tampered.stderr.startswith("docket: error: chain-broken: ")
    assert str(first["ledger_position"]) in tampered.stderr
