"""Receipts attacked: sealing raced by two processes, hostile output paths, an oversized or hostile bundle, a goal
that would drive the terminal. Each ends in a clear answer (never exit 70) and nothing lost or overwritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .receipt_world import RUN, clean_two_tasks, keys


@pytest.fixture
def sealed_world(docket):  # noqa: ANN001, ANN201
    clean_two_tasks(docket)
    docket("integrate", RUN)
    return docket


def test_two_processes_sealing_at_once_make_one_receipt(sealed_world):
    docket = sealed_world
    procs = [subprocess.Popen([sys.executable, "-m", "docket", "seal", RUN, "--json"], cwd=docket.cwd, env=docket.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _, _ in results), results
    digests = {json.loads(out)["receipt_sha256"] for _, out, _ in results}
    assert len(digests) == 1
    assert len(docket("log", "--json", "--type", "ReceiptSealed.v1").json()["events"]) == 1
    docket("verify")


def test_export_never_writes_through_a_symlink_nor_into_a_missing_folder(sealed_world, tmp_path):
    docket = sealed_world
    private, _ = keys(docket)
    docket("seal", RUN)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "bundle.jsonl"
    link.symlink_to(victim)
    through = docket("export", RUN, "--key", str(private), "--out", str(link), check=False)
    assert through.returncode in (2, 3) and through.stderr.startswith("docket: error: "), through.stderr
    assert through.stderr.count("\n") == 1 and victim.read_text() == "precious\n"
    missing = docket("export", RUN, "--key", str(private), "--out", str(tmp_path / "no" / "such" / "b.jsonl"),
                     check=False)
    assert missing.returncode in (2, 3, 5) and missing.stderr.startswith("docket: error: "), missing.stderr
    assert not (tmp_path / "no").exists()


def test_a_bundle_too_large_or_not_a_file_is_refused_clearly(sealed_world, tmp_path):
    docket = sealed_world
    _, public = keys(docket)
    folder = docket("verify-receipt", str(tmp_path), "--key", str(public), check=False)
    assert folder.returncode in (1, 2, 5) and folder.stderr.startswith("docket: error: "), folder.stderr
    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as f:  # sparse: past the bundle limit without using the disk
        f.truncate(300 * 1024 * 1024)
    big = docket("verify-receipt", str(huge), "--key", str(public), check=False)
    assert big.returncode in (1, 2) and big.stderr.startswith("docket: error: "), big.stderr
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    blocked = docket("verify-receipt", str(fifo), "--key", str(public), check=False)  # never opened for reading
    assert blocked.returncode in (1, 2) and blocked.stderr.startswith("docket: error: "), blocked.stderr


def test_a_goal_with_terminal_escapes_is_verified_but_never_printed_raw(docket, tmp_path):
    from ..conftest import git

    (docket.cwd / "docket.toml").write_text('[checks.ok]\ncommand = ["true"]\n')
    git(docket.cwd, "branch", "release")
    docket("init")
    goal = "ship \x1b]0;owned\x07 it \x1b[2J now \u202e"
    docket("run", "open", "--target", "release", "--goal", goal, "--id", RUN)
    docket("task", "plan", RUN, "--title", "t \x1b[31mred", "--id", "t1")
    candidate = docket("worker", "launch", RUN, "--task", "t1", "--json", "--", "sh", "-c",
                       "echo one > one.txt").json()["pin"]["candidate"]
    docket("check", "run", candidate["binding_id"])
    docket("handoff", "offer", candidate["binding_id"])
    docket("integrate", RUN)
    private, public = keys(docket)
    sealed = docket("seal", RUN)
    bundle = tmp_path / "b.jsonl"
    exported = docket("export", RUN, "--key", str(private), "--out", str(bundle))
    verified = docket("verify-receipt", str(bundle), "--key", str(public))
    for out in (sealed, exported, verified):
        assert "\x1b" not in out.stdout + out.stderr and "\u202e" not in out.stdout + out.stderr
    as_json = docket("verify-receipt", str(bundle), "--key", str(public), "--json").json()
    assert as_json["ok"] is True


def test_json_nested_past_the_parsers_depth_is_bad_input_not_a_crash(docket, tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 200_000 + "]" * 200_000 + "\n")
    keys_dir = tmp_path / "k"
    keys_dir.mkdir()
    docket("key", "generate", "--out", str(keys_dir / "docket"))
    verified = docket("verify-receipt", str(deep), "--key", str(keys_dir / "docket.pub"), check=False)
    assert verified.returncode == 1 and verified.stderr.startswith("docket: error: bad-bundle: line 1"), \
        verified.stderr
    docket("init")
    anchored = docket("verify", "--anchor", str(deep), check=False)
    assert anchored.returncode == 2 and anchored.stderr.startswith("docket: error: bad-anchor:"), anchored.stderr
    proved = docket("prove-consistency", str(deep), str(deep), check=False)
    assert proved.returncode == 2 and proved.stderr.startswith("docket: error: bad-anchor:"), proved.stderr
