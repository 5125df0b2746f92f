"""A red base under `docket go`: a real pytest suite with one test failing before any task, its JUnit report read.

Judged relative to the base, a task that adds no new failure is delivered and one that adds a failing test is
not (its feedback names that test and its assertion); judged by its exit, every task fails and the summary,
the status and the feedback say the check fails on the base too.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from docket.adapters.world.ledger.signing import load_signer, sign_statement
from docket.domain.reports.receipts import receipt_sha256
from tests.conftest import git
from tests.e2e.go_world import GoWorld, config, make_go_world

CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"  # mul is wrong at the base
TESTS = ("from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_mul():\n    assert mul(2, 3) == 6\n")
PYTEST = (f'["{sys.executable}", "-m", "pytest", "-q", "-p", "no:cacheprovider", '
          '"--junitxml={worktree}/out/junit.xml"]')

FIX_ELSE = """\
[[tasks]]
id = "sub"
title = "add subtraction"
prompt = '''Add sub.
write sub.py: def sub(a, b):\\n    return a - b
write test_sub.py: from sub import sub\\n\\n\\ndef test_sub():\\n    assert sub(5, 3) == 2
'''
"""
BREAK = """\
[[tasks]]
id = "div"
title = "add division"
prompt = '''Add div with a test that fails.
write test_div.py: def test_div():\\n    assert 7 // 2 == 4, "floor division"
'''
"""


def _red_base(tmp_path: Path, tasks: str, judge: str | None) -> GoWorld:
    world = make_go_world(tmp_path, tasks=tasks)
    check = f"\n[checks.tests]\ncommand = {PYTEST}\ntimeout = \"2m\"\njunit = \"out/junit.xml\"\n"
    if judge:
        check += f'judge = "{judge}"\n'
    (world.repo / "docket.toml").write_text('artifact_dir = "out"\n' + config(extra=check))
    (world.repo / "calc.py").write_text(CALC)
    (world.repo / "test_calc.py").write_text(TESTS)
    (world.repo / ".gitignore").write_text("tasks.toml\n__pycache__/\n")
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-q", "-m", "a suite with one failing test")
    return world


def _feedback(world: GoWorld, task_id: str) -> list[str]:
    return [e["payload"]["feedback"] for e in world.events("TaskFeedbackRecorded")
            if e["payload"]["task_id"] == task_id]


def test_judged_relative_to_the_base_only_a_new_failing_test_fails_a_task(tmp_path: Path) -> None:
    world = _red_base(tmp_path, FIX_ELSE + BREAK, "relative-to-base")
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    done = world.go("r1", "--target", "main", "--cycles", "1", "--key", f"{keys}.key")
    summary = json.loads(done.stdout)
    rows = {row["task"]: row for row in summary["tasks"]}
    assert rows["sub"]["result"] == "delivered", done.stderr
    assert (rows["div"]["result"], rows["div"]["code"]) == ("failed", "check-failed")
    assert world.file_at("main", "sub.py") == "def sub(a, b):\n    return a - b\n"
    # the base was checked once, and its failing test recorded
    base = [e["payload"] for e in world.events("CheckTestsReported") if e["payload"]["judge"] == "exit"]
    assert len(base) == 1 and [f["id"] for f in base[0]["failing"]] == ["test_calc::test_mul"]
    assert summary["base_checks"]["tests"]["result"] == "failed"
    # what each judgment rested on: which tests failed, which were failing at the base already (sub's candidate,
    # its base-tests tree (it added test_sub.py: the base's tests on its code, judged the same way), div's, and the
    # merge of sub the queue checked again; div's own run failed, so its base-tests tree was never run)
    judged = {e["payload"]["binding_id"]: e["payload"] for e in world.events("CheckTestsReported")
              if e["payload"]["judge"] == "relative-to-base"}
    assert sorted((p["new_failures"], p["known_failures"]) for p in judged.values()) == \
        [([], ["test_calc::test_mul"])] * 3 + [(["test_div::test_div"], ["test_calc::test_mul"])]
    assert all(p["base_check_id"] == base[0]["check_id"] for p in judged.values())
    (feedback,) = _feedback(world, "r1.div")
    assert "test_div::test_div" in feedback and "floor division" in feedback and "assert (7 // 2) == 4" in feedback and "at test_div.py:2" in feedback
    assert "test_calc::test_mul" not in feedback.split("already failing")[0]
    assert "fails on the run's base too" in feedback
    assert world.run("verify").returncode == 0
    # the receipt cites why sub's check passed beside a failing test: the judgment, and the base's report
    sealed = world.events("ReceiptSealed")[0]["payload"]["receipt"]
    (sub,) = [t for t in sealed["tasks"] if t["task_id"] == "r1.sub"]
    tests = [c["tests"] for c in sub["checks"] if c["check"] == "tests"]
    assert tests and all(t["judge"] == "relative-to-base" and t["failing"] == ["test_calc::test_mul"]
                         and t["known_failures"] == ["test_calc::test_mul"] and t["new_failures"] == []
                         and t["base"]["failing"] == ["test_calc::test_mul"] for t in tests), tests
    bundle = Path(summary["receipt"]["path"])
    verified = world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stderr
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    statements = [json.loads(base64.b64decode(line["payload"])) for line in lines[1:]]
    failed_lists = [st["predicate"]["failedTests"] for st in statements if st["predicate"]["result"] == "PASSED"]
    assert ["test_calc::test_mul"] in failed_lists  # the signed test result names the known failure, PASSED
    # a forger holding the key who hides the failing test, or claims the base failed another, is caught
    for change in (lambda t: t.update(failing=[], known_failures=[]),
                   lambda t: t["base"].update(failing=["test_calc::test_other"])):
        forged = copy.deepcopy(json.loads(base64.b64decode(lines[0]["payload"])))
        receipt = forged["predicate"]["receipt"]
        change(next(c for t in receipt["tasks"] if t["task_id"] == "r1.sub" for c in t["checks"] if "tests" in c)
               ["tests"])
        forged["predicate"]["receipt_sha256"] = receipt_sha256(receipt)
        envelope = sign_statement(forged, load_signer(f"{keys}.key"))
        (tmp_path / "forged.jsonl").write_text("\n".join([json.dumps(envelope), *bundle.read_text().splitlines()[1:]])
                                               + "\n")
        refused = world.run("verify-receipt", str(tmp_path / "forged.jsonl"), "--key", f"{keys}.pub")
        assert refused.returncode == 1 and "receipt-contradicts-event" in refused.stderr, refused.stderr


def test_judged_by_its_exit_a_red_base_is_named_in_the_summary_the_status_and_the_feedback(tmp_path: Path) -> None:
    world = _red_base(tmp_path, FIX_ELSE, None)
    done = world.go("r1", "--target", "main", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    summary = json.loads(done.stdout)
    assert summary["tasks"][0]["result"] == "failed"
    assert summary["base_checks"]["tests"]["result"] == "failed"
    status = world.run("status", "r1")
    assert "check tests fails on the run's base too: failed (exit)" in status.stdout, status.stdout
    assert world.json("status", "r1")["base_checks"][0]["status"] == "failed"
    (feedback,) = _feedback(world, "r1.sub")
    assert "fails on the run's base too" in feedback
    assert "test_calc::test_mul" in feedback and "assert 5 == 6" in feedback  # the failing test and its assertion
    human = world.run("go", "--resume", "r1")
    assert "check tests fails on the run's base too" in human.stdout + human.stderr
    # the base's candidate holds no work of its own: it is released without --discard
    released = world.run("candidate", "release", summary["base_checks"]["tests"]["binding_id"])
    assert released.returncode == 0, released.stderr

BASE_CHECK_POINTS = ["base:after-check", "base-tests:after-check"]


@pytest.mark.parametrize("point", BASE_CHECK_POINTS)
def test_killed_after_the_base_was_checked_the_resumed_run_reuses_that_result(tmp_path: Path, point: str) -> None:
    world = _red_base(tmp_path, FIX_ELSE, "relative-to-base")
    killed = world.go("r1", "--target", "main", "--cycles", "1", fault=point)
    assert killed.returncode == -9, killed.stderr
    done = world.go("r1", "--target", "main", "--cycles", "1")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["tasks"][0]["result"] == "delivered"
    on_base = [e for e in world.events("CheckRequested") if e["payload"]["task_id"] == "r1"]
    assert [e["payload"]["check"] for e in on_base] == ["tests"]  # run once, never again
    reconcile = world.json("reconcile")
    assert reconcile["findings"] == [] and reconcile["git"] == [] and reconcile["unfinished_checks"] == []


REPAIRED = """\
[[tasks]]
id = "pow"
title = "add power"
prompt = '''Add pow with its test.
first attempt: write pw.py: def pw(a, b):\\n    return a * b
write pw.py: def pw(a, b):\\n    return a ** b
write test_pw.py: from pw import pw\\n\\n\\ndef test_pw():\\n    assert pw(2, 3) == 8
'''
"""


def test_the_readme_red_base_example_repairs_a_task_whose_first_generation_fails_a_test(tmp_path: Path) -> None:
    # The report the first check copied back into the worktree (out/junit.xml) must not make every later check of
    # the task fail: the second generation's check writes a different report at the same path.
    world = _red_base(tmp_path, REPAIRED, "relative-to-base")
    done = world.go("r1", "--target", "main", "--cycles", "3")
    assert done.returncode == 0, (done.stdout, done.stderr)
    rows = {row["task"]: row for row in json.loads(done.stdout)["tasks"]}
    assert rows["pow"]["result"] == "delivered", rows
    codes = [e["payload"].get("code") for e in world.events("CheckFailed")]
    assert codes == ["exit", "exit"], codes  # the red base's and the first generation's, nothing else
    assert world.file_at("main", "pw.py") == "def pw(a, b):\n    return a ** b\n"
    (worktree,) = {e["payload"]["path"] for e in world.events("WorktreeCreated")
                   if e["payload"]["task_id"] == "r1.pow"}
    # the worktree holds the latest check's report, not the first one's
    report = ElementTree.parse(Path(worktree) / "out" / "junit.xml")
    (case,) = [c for c in report.iter("testcase") if c.get("name") == "test_pw"]
    assert case.find("failure") is None
