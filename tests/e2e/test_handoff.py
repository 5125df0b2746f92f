"""Handoff through the real CLI: confirmed only when every condition holds, else rejected naming the one that fails."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ..conftest import git

RUN, TASK = "r1", "t1"
CHECKS = '[checks.ok]\ncommand = ["true"]\n[checks.lint]\ncommand = ["sh", "-c", "exit 1"]\nrequired = false\n'


@pytest.fixture
def world(docket):  # noqa: ANN001, ANN201
    (docket.cwd / "docket.toml").write_text(CHECKS)
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)
    return docket


def pinned(docket, script: str = "echo one > a.txt") -> dict:  # noqa: ANN001
    return docket("worker", "launch", RUN, "--task", TASK, "--json", "--", "sh", "-c",
                  script).json()["pin"]["candidate"]


def payloads(docket, type_name: str) -> list[dict]:  # noqa: ANN001
    return [e["payload"] for e in docket("log", "--json", "--type", type_name).json()["events"]]


def test_a_handoff_is_confirmed_once_its_required_checks_passed_and_not_before(world):
    docket = world
    candidate = pinned(docket)
    key = candidate["binding_id"][:12]
    offered = docket("handoff", "offer", key, "--json").json()
    assert offered["handoff"] == "offered" and offered["generation"] == 1
    early = docket("handoff", "confirm", key, check=False)
    assert early.returncode == 3 and "docket: error: check-missing:" in early.stderr
    assert early.stderr.count("\n") == 1
    docket("check", "run", key, "--check", "ok")
    confirmed = docket("handoff", "confirm", key, "--json").json()  # the optional lint never ran: no matter
    assert confirmed["handoff"] == "confirmed" and confirmed["commit"] == candidate["commit"]
    (event,) = payloads(docket, "HandoffConfirmed.v1")
    (check,) = event["checks"]
    (passed,) = payloads(docket, "CheckPassed.v1")
    assert (check["check"], check["check_id"], check["config_sha256"]) == (
        "ok", passed["check_id"], passed["config_sha256"])
    assert [r["code"] for r in payloads(docket, "HandoffRejected.v1")] == ["check-missing"]
    row = [r for r in docket("candidate", "list", "--json").json()["candidates"]][0]
    assert (row["handoff"], row["handoff_code"]) == ("confirmed", None)


def test_a_check_passed_under_an_older_configuration_does_not_count(world):
    docket = world
    key = pinned(docket)["binding_id"]
    docket("handoff", "offer", key)
    docket("check", "run", key, "--check", "ok")
    (docket.cwd / "docket.toml").write_text(CHECKS.replace('["true"]', '["true", "--changed"]'))
    stale = docket("handoff", "confirm", key, check=False)
    assert stale.returncode == 3 and "check-config-changed" in stale.stderr


def test_a_failed_required_check_and_a_moved_pin_are_rejected(world):
    docket = world
    (docket.cwd / "docket.toml").write_text('[checks.bad]\ncommand = ["false"]\n')
    candidate = pinned(docket)
    key = candidate["binding_id"]
    docket("handoff", "offer", key)
    docket("check", "run", key, check=False)
    failed = docket("handoff", "confirm", key, check=False)
    assert failed.returncode == 3 and "check-failed" in failed.stderr
    git(docket.cwd, "update-ref", candidate["ref"], git(docket.cwd, "rev-parse", "HEAD"))  # moved by hand
    (docket.cwd / "docket.toml").write_text('[checks.bad]\ncommand = ["true"]\n')
    docket("check", "run", key, check=False)
    moved = docket("handoff", "confirm", key, check=False)
    assert moved.returncode == 3 and "pin-changed" in moved.stderr


def test_a_fenced_generation_cannot_offer_its_candidate(world):
    docket = world
    first = pinned(docket)
    pinned(docket, "echo two > b.txt")  # generation 2: generation 1 is fenced
    refused = docket("handoff", "offer", first["binding_id"], check=False)
    assert refused.returncode == 3 and "stale-generation" in refused.stderr
    (recorded,) = payloads(docket, "WorkerActionRefused.v1")
    assert (recorded["generation"], recorded["action"], recorded["code"]) == (1, "handoff-offer", "stale-generation")
    assert payloads(docket, "HandoffOffered.v1") == []


def test_a_worker_still_running_keeps_its_handoff_unconfirmed(world):
    docket = world
    workers = docket.cwd / ".git" / "docket" / "workers"  # the marker goes to its TMPDIR: its sandbox allows it
    proc = subprocess.Popen([sys.executable, "-m", "docket", "worker", "launch", RUN, "--task", TASK, "--", "sh",
                             "-c", 'echo x > x.txt; touch "$TMPDIR/started"; sleep 30'], cwd=docket.cwd,
                            env=docket.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not list(workers.glob("*/*/tmp/started")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        key = docket("candidate", "pin", RUN, "--task", TASK, "--json").json()["binding_id"]
        docket("check", "run", key, "--check", "ok")
        docket("handoff", "offer", key)
        alive = docket("handoff", "confirm", key, check=False)
        assert alive.returncode == 3 and "worker-alive" in alive.stderr, alive.stderr
    finally:
        docket("worker", "stop", TASK, check=False)
        proc.communicate(timeout=60)
    confirmed = docket("handoff", "confirm", key, "--json").json()  # gone now, its lease released
    assert confirmed["handoff"] == "confirmed"
