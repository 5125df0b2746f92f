"""Approval through the real CLI: `docket approve` records who approved which confirmed candidates, `docket status`
shows what awaits approval when docket.toml requires it, and integration waits for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.world.clock import FixedClock
from docket.cli.app import COMMANDS
from docket.domain import events as ev
from docket.domain.merge_queue import integration as integration_aggregate
from docket.domain.run import Run

from ..conftest import git

RUN = "r1"
TARGET = "release"  # not checked out anywhere: integration may move it
CHECKS = '[checks.ok]\ncommand = ["true"]\n'
APPROVAL = CHECKS + "[integration]\napproval = true\n"


@pytest.fixture
def world(docket):  # noqa: ANN001, ANN201
    (docket.cwd / "docket.toml").write_text(APPROVAL)
    git(docket.cwd, "branch", TARGET)
    docket("init")
    docket("run", "open", "--target", TARGET, "--goal", "g", "--id", RUN)
    for task in ("t1", "t2"):
        docket("task", "plan", RUN, "--title", task, "--id", task)
    return docket


def pinned(docket, task: str, script: str) -> dict:  # noqa: ANN001
    return docket("worker", "launch", RUN, "--task", task, "--json", "--", "sh", "-c",
                  script).json()["pin"]["candidate"]


def confirmed(docket, task: str, script: str) -> dict:  # noqa: ANN001
    """A worker's candidate for the task, its required check passed and its handoff confirmed."""
    candidate = pinned(docket, task, script)
    docket("check", "run", candidate["binding_id"], "--check", "ok")
    docket("handoff", "offer", candidate["binding_id"])
    docket("handoff", "confirm", candidate["binding_id"])
    return candidate


def payloads(docket, type_name: str) -> list[dict]:  # noqa: ANN001
    return [e["payload"] for e in docket("log", "--json", "--type", type_name).json()["events"]]


def awaiting(docket) -> list[tuple[str, str]]:  # noqa: ANN001
    run = docket("status", RUN, "--json").json()["integration"]
    (listed,) = [r for r in docket("status", "--json").json()["runs"] if r["run_id"] == RUN]
    assert listed["integration"] == run  # the listing carries the same
    return [(c["task_id"], c["binding_id"]) for c in run["awaiting_approval"]]


def refused(result, code: str, exit_code: int = 3) -> None:  # noqa: ANN001
    assert result.returncode == exit_code, result.stderr
    assert result.stderr.startswith(f"docket: error: {code}: ") and result.stderr.count("\n") == 1, result.stderr


def test_status_shows_what_awaits_approval_until_each_task_is_approved(world):
    docket = world
    first = confirmed(docket, "t1", "echo one > a.txt")
    second = confirmed(docket, "t2", "echo two > b.txt")
    assert awaiting(docket) == [("t1", first["binding_id"]), ("t2", second["binding_id"])]
    human = docket("status").stdout
    todo = f"  action needed: awaiting approval of task(s) t1, t2: 'docket approve {RUN} --by NAME'\n"
    assert todo in human and todo in docket("status", RUN).stdout and todo in docket("watch", RUN, "--once").stdout
    assert docket("watch", RUN, "--json").json()["attention"] == [todo.split(": ", 1)[1].strip()]
    assert f"  awaiting approval: task t1 (candidate {first['binding_id'][:8]}\u2026)\n" in human
    assert f"  awaiting approval: task t2 (candidate {second['binding_id'][:8]}\u2026)" in human

    one = docket("approve", RUN, "--task", "t2", "--by", "Ada Lovelace", "--json").json()
    assert (one["run_id"], one["by"]) == (RUN, "Ada Lovelace")
    assert one["candidates"] == [{"task_id": "t2", "binding_id": second["binding_id"], "commit": second["commit"]}]
    assert awaiting(docket) == [("t1", first["binding_id"])]
    assert "awaiting approval: task t2" not in docket("status", RUN).stdout

    every = docket("approve", RUN, "--by", "Grace Hopper", "--json").json()  # every task's, approved again or not
    assert [(c["task_id"], c["binding_id"]) for c in every["candidates"]] == [
        ("t1", first["binding_id"]), ("t2", second["binding_id"])]
    assert awaiting(docket) == []
    assert "awaiting approval" not in docket("status").stdout
    assert "action needed" not in docket("watch", RUN, "--once").stdout
    shown = docket("status", RUN).stdout
    assert "  approved by Ada Lovelace at " in shown and "  approved by Grace Hopper at " in shown

    recorded = payloads(docket, "ApprovalRecorded.v1")
    assert [(p["run_id"], p["by"]) for p in recorded] == [(RUN, "Ada Lovelace"), (RUN, "Grace Hopper")]
    assert recorded[1]["candidates"] == [
        {"task_id": "t1", "binding_id": first["binding_id"], "commit": first["commit"]},
        {"task_id": "t2", "binding_id": second["binding_id"], "commit": second["commit"]}]
    approvals = docket("status", RUN, "--json").json()["approvals"]
    assert [(a["by"], a["task_ids"], a["binding_ids"]) for a in approvals] == [
        ("Ada Lovelace", ["t2"], [second["binding_id"]]),
        ("Grace Hopper", ["t1", "t2"], sorted([first["binding_id"], second["binding_id"]]))]
    assert approvals[0]["recorded_at"] == docket("log", "--json", "--type", "ApprovalRecorded.v1").json()[
        "events"][0]["recorded_at"]


def test_only_each_tasks_latest_confirmed_candidate_is_approved(world):
    docket = world
    confirmed(docket, "t1", "echo one > a.txt")
    latest = confirmed(docket, "t1", "echo again > a.txt")  # generation 2's candidate
    pinned(docket, "t1", "echo unconfirmed > a.txt")  # generation 3's: pinned, never handed off
    approved = docket("approve", RUN, "--by", "Ada", "--json").json()
    assert [(c["task_id"], c["binding_id"]) for c in approved["candidates"]] == [("t1", latest["binding_id"])]


def test_nothing_confirmed_is_nothing_to_approve(world):
    docket = world
    refused(docket("approve", RUN, "--by", "Ada", check=False), "nothing-to-approve")
    candidate = pinned(docket, "t1", "echo one > a.txt")
    docket("handoff", "offer", candidate["binding_id"])  # offered, never confirmed
    refused(docket("approve", RUN, "--by", "Ada", check=False), "nothing-to-approve")
    confirmed(docket, "t2", "echo two > b.txt")
    refused(docket("approve", RUN, "--task", "t1", "--by", "Ada", check=False), "nothing-to-approve")
    assert awaiting(docket) == [("t2", payloads(docket, "HandoffConfirmed.v1")[0]["binding_id"])]
    assert payloads(docket, "ApprovalRecorded.v1") == []
    refused(docket("approve", "r9", "--by", "Ada", check=False), "run-not-found", 5)
    refused(docket("approve", RUN, "--task", "t9", "--by", "Ada", check=False), "task-not-found", 5)


@pytest.mark.parametrize("by", ["", "   ", "Ada\nLovelace", "Ada\x1b]0;owned\x07", "Ada\u202e", "x" * 201])
def test_a_bad_approver_name_is_refused_before_anything_is_recorded(world, by):
    docket = world
    confirmed(docket, "t1", "echo one > a.txt")
    refused(docket("approve", RUN, "--by", by, check=False), "bad-approver", 2)
    assert payloads(docket, "ApprovalRecorded.v1") == []


def test_the_longest_approver_name_and_a_missing_one(world):
    docket = world
    confirmed(docket, "t1", "echo one > a.txt")
    assert docket("approve", RUN, "--by", "é" * 200, "--json").json()["by"] == "é" * 200
    missing = docket("approve", RUN, check=False)
    assert missing.returncode == 2 and "--by" in missing.stderr


def test_an_approval_after_the_integration_is_prepared_is_refused(world):
    docket = world
    candidate = confirmed(docket, "t1", "echo one > a.txt")
    docket("approve", RUN, "--by", "Ada")
    prepare(docket, candidate)
    refused(docket("approve", RUN, "--by", "Grace", check=False), "integration-prepared")
    assert [p["by"] for p in payloads(docket, "ApprovalRecorded.v1")] == ["Ada"]
    integration = docket("status", RUN, "--json").json()["integration"]
    assert (integration["status"], integration["steps"], integration["awaiting_approval"]) == ("merging", 1, [])


def prepare(docket, candidate: dict) -> None:  # noqa: ANN001
    """IntegrationPrepared with the candidate as its one step, decided by the aggregate (as `docket integrate`
    would, without merging anything)."""
    ledger = Ledger(docket.ledger)
    try:
        worker = payloads(docket, "HandoffConfirmed.v1")[-1]

        def decision(now: str) -> list[ev.Event]:
            from docket.adapters.service_layer.use_cases.runs import load_run

            existing = ledger.get(integration_aggregate.apply, integration_aggregate.stream_of(RUN))
            run: Run = load_run(ledger, RUN)
            step = ev.IntegrationStep(task_id="t1", binding_id=candidate["binding_id"], commit=candidate["commit"],
                                      worker_id=worker["worker_id"], generation=worker["generation"])
            return integration_aggregate.prepare(
                existing, run, repository=str(docket.cwd / ".git"), target_branch=TARGET,
                expected_commit=git(docket.cwd, "rev-parse", TARGET), integration_ref=f"refs/docket/integrations/{RUN}",
                steps=[step], required_checks=[], overlaps=[], approval_required=True, now=now)

        ledger.decide(decision, FixedClock("2030-01-01T00:00:00.000Z").now())
    finally:
        ledger.close()


def test_without_approval_configured_nothing_awaits_it(world):
    docket = world
    (docket.cwd / "docket.toml").write_text(CHECKS)
    confirmed(docket, "t1", "echo one > a.txt")
    integration = docket("status", RUN, "--json").json()["integration"]
    assert (integration["status"], integration["awaiting_approval"]) == ("unprepared", [])
    assert "awaiting approval" not in docket("status", RUN).stdout
    (docket.cwd / "docket.toml").write_text("[integration\n")  # unparsable: status still answers
    assert docket("status", RUN, "--json").json()["integration"]["awaiting_approval"] == []


def test_status_with_approval_configured_imports_no_heavy_module(world):
    docket = world
    confirmed(docket, "t1", "echo one > a.txt")
    docket("status")  # the views are current
    probe = ("import sys, io, contextlib\n"
             "from docket.cli.app import main\n"
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n"
             f"    code = main(['status', '{RUN}'])\n"
             "heavy = {'pydantic', 'eventsourcing', 'dulwich', 'sqlite_utils', 'psutil', 'anyio'}\n"
             "print(code, 'awaiting approval: task t1' in out.getvalue(),"
             " sorted({m.split('.')[0] for m in sys.modules} & heavy))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=docket.cwd, env=docket.env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "0 True []"


@pytest.mark.skipif("integrate" not in COMMANDS, reason="`docket integrate` is not registered yet")
def test_integration_waits_for_approval_then_goes_on(world):
    docket = world
    first = confirmed(docket, "t1", "echo one > a.txt")
    second = confirmed(docket, "t2", "echo two > b.txt")
    before = git(docket.cwd, "rev-parse", TARGET)
    refused(docket("integrate", RUN, check=False), "awaiting-approval")
    assert payloads(docket, "IntegrationPrepared.v1") == [] and git(docket.cwd, "rev-parse", TARGET) == before
    docket("approve", RUN, "--task", "t1", "--by", "Ada")
    waiting = docket("integrate", RUN, check=False)
    refused(waiting, "awaiting-approval")
    assert "t2" in waiting.stderr and "t1" not in waiting.stderr.split("task(s)", 1)[1].split("(")[0]
    docket("approve", RUN, "--task", "t2", "--by", "Grace")
    docket("integrate", RUN)
    (prepared,) = payloads(docket, "IntegrationPrepared.v1")
    assert prepared["approved_by"] == ["Ada", "Grace"]
    assert [s["binding_id"] for s in prepared["steps"]] == [first["binding_id"], second["binding_id"]]
    integration = docket("status", RUN, "--json").json()["integration"]
    assert (integration["status"], integration["steps_verified"], integration["awaiting_approval"]) == (
        "completed", 2, [])
    assert integration["final_commit"] == git(docket.cwd, "rev-parse", TARGET) != before
    assert "  integration: completed, 2 task(s) delivered, release at " in docket("status").stdout
    refused(docket("approve", RUN, "--by", "Late", check=False), "integration-prepared")
