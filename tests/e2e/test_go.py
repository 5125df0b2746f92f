"""`docket go` end to end with the scripted agent: parallel tasks, a dependency, a repair cycle, the receipt."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import DELIVERED, docket_processes, make_go_world

ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "add the greeting"\nprompt = "write greet.py: print(1)"\n'


def test_three_tasks_one_dependency_one_repair_are_delivered_and_the_receipt_verifies_offline(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk")
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    done = world.go("r1", "--target", "trunk", "--parallel", "3", "--key", f"{keys}.key")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    by_task = {row["task"]: row for row in summary["tasks"]}
    assert summary["outcome"] == "delivered" and summary["status"] == "completed"
    assert {task: row["result"] for task, row in by_task.items()} == {"greet": "delivered", "name": "delivered",
                                                                      "shout": "delivered"}
    assert (by_task["greet"]["cycles"], by_task["name"]["cycles"], by_task["shout"]["cycles"]) == (1, 2, 1)
    assert all(row["checks"] == {"compiles": "passed"} for row in summary["tasks"])
    # the target advanced to the integration of all three, by compare-and-swap from the base
    assert git(world.repo, "rev-parse", "trunk") == summary["target_commit"]
    for path, text in DELIVERED.items():
        assert world.file_at("trunk", path) == text
    # the repair: generation 1 of `name` failed its check, and generation 2's prompt carried the feedback
    feedback = world.events("TaskFeedbackRecorded")
    assert [(f["payload"]["task_id"], f["payload"]["generation"], f["payload"]["code"], f["payload"]["check"])
            for f in feedback] == [("r1.name", 1, "check-failed", "compiles")]
    # `shout` started from the merge of `greet`'s candidate
    shout_worktree = [e for e in world.events("WorktreeRequested") if e["payload"]["task_id"] == "r1.shout"]
    base = world.events("RunBasePinned")[0]["payload"]["commit"]
    assert shout_worktree[0]["payload"]["base"] != base
    assert git(world.repo, "show", f"{shout_worktree[0]['payload']['base']}:greet.py") == 'print("hello")'
    # one receipt, exported and verified offline with the public key only
    assert len(world.events("ReceiptSealed")) == 1
    bundle = Path(summary["receipt"]["path"])
    verified = world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stderr
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []
    reconcile = world.json("reconcile")
    assert reconcile["findings"] == [] and reconcile["git"] == []


def test_a_task_that_never_passes_fails_after_its_cycles_and_the_rest_is_delivered(tmp_path: Path):
    tasks = '''\
[[tasks]]
id = "good"
title = "good"
prompt = "write good.py: X = 1"

[[tasks]]
id = "bad"
title = "never compiles"
prompt = "write bad.py: broken"
'''
    world = make_go_world(tmp_path, target="trunk", tasks=tasks)
    done = world.go("r1", "--target", "trunk", "--cycles", "2")
    assert done.returncode == 6, done.stderr
    summary = json.loads(done.stdout)
    rows = {row["task"]: row for row in summary["tasks"]}
    assert rows["good"]["result"] == "delivered"
    assert (rows["bad"]["result"], rows["bad"]["cycles"], rows["bad"]["code"]) == ("failed", 2, "check-failed")
    assert world.file_at("trunk", "good.py") == "X = 1\n"
    assert "bad.py" not in git(world.repo, "ls-tree", "--name-only", "trunk")
    receipt = world.events("ReceiptSealed")[0]["payload"]["receipt"]
    assert [t["task_id"] for t in receipt["undelivered"]] == ["r1.bad"]


def test_a_dependency_that_fails_fails_its_dependents_without_running_them(tmp_path: Path):
    tasks = '''\
[[tasks]]
id = "base"
title = "never compiles"
prompt = "write base.py: broken"

[[tasks]]
id = "after"
title = "after"
depends_on = ["base"]
prompt = "write after.py: X = 1"
'''
    world = make_go_world(tmp_path, target="trunk", tasks=tasks)
    done = world.go("r1", "--target", "trunk", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    rows = {row["task"]: row for row in json.loads(done.stdout)["tasks"]}
    assert (rows["after"]["result"], rows["after"]["code"], rows["after"]["cycles"]) == \
        ("failed", "dependency-failed", 0)
    assert not [e for e in world.events("WorkerRegistered") if e["payload"]["worker_id"] == "r1.after"]


def test_what_the_agent_reports_in_its_output_is_recorded_with_its_exit(tmp_path: Path):
    result = json.dumps({"type": "result", "is_error": False, "num_turns": 2, "session_id": "sess-42",
                         "total_cost_usd": 0.0042, "usage": {"input_tokens": 321, "output_tokens": 54}})
    tasks = f'[[tasks]]\nid = "only"\ntitle = "t"\nprompt = """write a.py: X = 1\nsay: {result}\n"""\n'
    world = make_go_world(tmp_path, target="trunk", tasks=tasks, agent_extra='report = "claude-json"')
    done = world.go("r1", "--target", "trunk")
    assert done.returncode == 0, done.stderr
    (reported,) = world.events("AgentReported")
    assert {k: reported["payload"][k] for k in ("generation", "agent", "format", "session_id", "input_tokens",
                                                "output_tokens", "cost_micro_usd", "turns", "is_error")} == \
        {"generation": 1, "agent": "scripted", "format": "claude-json", "session_id": "sess-42", "input_tokens": 321,
         "output_tokens": 54, "cost_micro_usd": 4200, "turns": 2, "is_error": False}
    exited = world.events("WorkerExited")[0]
    assert reported["position"] == exited["position"] + 1  # one transaction with the exit
    status = world.run("status", "r1").stdout
    assert "agent reported: 321 tokens in, 54 out, $0.0042, 2 turn(s), session sess-42" in status


def test_a_task_with_two_dependencies_is_delivered_with_both(tmp_path: Path):
    # c starts from the merge of a's and b's candidates; integrating it after a and b meets two merge bases
    # (a and b themselves: a criss-cross history), which are merged into a virtual base as git does
    tasks = '''\
[[tasks]]
id = "a"
title = "a"
prompt = "write a.py: A = 1"

[[tasks]]
id = "b"
title = "b"
prompt = "write b.py: B = 2"

[[tasks]]
id = "c"
title = "c"
depends_on = ["a", "b"]
prompt = """append a.py: C = 3
append b.py: C = 3
"""
'''
    world = make_go_world(tmp_path, target="trunk", tasks=tasks)
    done = world.go("r1", "--target", "trunk", "--parallel", "2")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert {row["task"]: row["result"] for row in summary["tasks"]} == {"a": "delivered", "b": "delivered",
                                                                        "c": "delivered"}
    assert git(world.repo, "rev-parse", "trunk") == summary["target_commit"]
    assert (world.file_at("trunk", "a.py"), world.file_at("trunk", "b.py")) == ("A = 1\nC = 3\n", "B = 2\nC = 3\n")
    assert world.run("verify").returncode == 0


def test_a_run_started_with_a_key_and_resumed_without_it_exports_with_the_planned_key(tmp_path: Path):
    """The plan records the key (its id and path); --resume without --key exports with it, or says why it cannot."""
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    keyid = world.json("key", "generate", "--out", str(keys))["keyid"]
    crashed = world.go("r1", "--target", "main", "--key", f"{keys}.key", fault="go:before-seal")
    assert crashed.returncode == -9, crashed.stderr
    (planned,) = world.events("RunPlanned")
    assert planned["type"] == "RunPlanned.v2"
    assert planned["payload"]["export_key"] == {"keyid": keyid, "path": f"{keys}.key"}
    done = world.resume("r1")
    assert done.returncode == 0, done.stderr
    bundle = Path(json.loads(done.stdout)["receipt"]["path"])
    assert world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub").returncode == 0


def test_a_resume_that_cannot_use_the_planned_key_says_so_before_any_work(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    keyid = world.json("key", "generate", "--out", str(keys))["keyid"]
    other = tmp_path / "keys" / "other"
    world.json("key", "generate", "--out", str(other))
    crashed = world.go("r1", "--target", "main", "--key", f"{keys}.key", fault="go:before-seal")
    assert crashed.returncode == -9, crashed.stderr
    refused = world.resume("r1", "--key", f"{other}.key")
    assert refused.returncode == 3 and "plan-differs" in refused.stderr and keyid in refused.stderr
    Path(f"{keys}.key").rename(tmp_path / "moved.key")
    gone = world.resume("r1")
    assert gone.returncode == 5, gone.stderr
    assert "key-not-found" in gone.stderr and keyid in gone.stderr and f"{keys}.key" in gone.stderr
    assert world.events("ReceiptSealed") == []  # nothing done without it
    done = world.resume("r1", "--key", str(tmp_path / "moved.key"))  # the same key, moved: its id matches
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["receipt"]["path"]


def test_without_target_the_run_targets_the_branch_checked_out_in_the_main_checkout_and_says_so(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    git(world.repo, "checkout", "-q", "-b", "trunk")
    done = world.go("r1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"] == "trunk"
    assert "target trunk (the branch checked out in" in done.stderr
    assert world.file_at("trunk", "greet.py") == "print(1)\n"


def test_a_run_with_no_required_check_says_so_when_planned_and_in_its_summary(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=ONE_TASK, extra_config="required = false\n")
    done = world.go("r1")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "delivered"
    assert [w["code"] for w in summary["warnings"]] == ["no-checks"]
    planned, summarised = [w for w in done.stderr.splitlines() if w.startswith("docket: warning: no-checks: ")]
    assert "[checks.NAME]" in planned and "not checked" in summarised
    again = world.run("go", "--resume", "r1")
    assert again.returncode == 0, again.stderr
    assert "  warning: no required check" in again.stdout


def test_a_run_with_a_required_check_has_no_no_checks_warning(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    done = world.go("r1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["warnings"] == [] and "no-checks" not in done.stderr
