"""`docket go`'s merge queue: each task is integrated as it passes, a step that cannot merge is dropped (the rest
is delivered) and its task repaired on top of the integrated head, within its cycles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import make_go_world, wait_until

# The fifth task appends to the end of the file the second appends to: a textual conflict.
FIVE = '''\
[[tasks]]
id = "t1"
title = "one"
prompt = "write one.txt: one"

[[tasks]]
id = "t2"
title = "two"
prompt = "append notes.txt: two"

[[tasks]]
id = "t3"
title = "three"
prompt = "write three.txt: three"

[[tasks]]
id = "t4"
title = "four"
prompt = "write four.txt: four"

[[tasks]]
id = "t5"
title = "five"
prompt = "append notes.txt: five"
'''

CHECK = '''
[checks.ok]
command = ["true"]
'''

REPAIR_POINTS = ["go:before-repair"]  # killed here and resumed below


def _world(tmp_path: Path, tasks: str, idle_timeout: str = "30s", workspace_root: Path | None = None):
    extra = CHECK if workspace_root is None else f'{CHECK}\n[workspace]\nroot = "{workspace_root}"\n'
    world = make_go_world(tmp_path, tasks=tasks, extra_config=extra, idle_timeout=idle_timeout)
    (world.repo / "notes.txt").write_text("notes\n")
    (world.repo / "m.py").write_text("x = 1\n")  # for the world's compiles check
    git(world.repo, "add", "notes.txt", "m.py")
    git(world.repo, "commit", "-q", "-m", "notes")
    return world


@pytest.mark.parametrize("root", ["default", "configured"])
def test_a_conflicting_task_is_dropped_the_rest_delivered_and_it_is_repaired_on_the_integrated_head(tmp_path, root):
    workspace_root = tmp_path / "workspaces-elsewhere" if root == "configured" else None
    world = _world(tmp_path, FIVE, workspace_root=workspace_root)
    done = world.run("go", "--goal", "five", "--tasks", "tasks.toml", "--target", "main", "--id", "q1", "--parallel",
                     "1", "--json")
    summary = json.loads(done.stdout)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert [row["result"] for row in summary["tasks"]] == ["delivered"] * 5
    assert world.file_at("main", "notes.txt") == "notes\ntwo\nfive\n"
    for name in ("one", "three", "four"):
        assert world.file_at("main", f"{name}.txt") == f"{name}\n"
    five = summary["tasks"][4]
    assert five["cycles"] == 2
    assert [c["paths"] for c in five["conflicts"]] == [["notes.txt"]]
    feedback = [e for e in world.events("TaskFeedbackRecorded") if e["payload"]["task_id"] == "q1.t5"]
    assert [f["payload"]["code"] for f in feedback] == ["integration-conflict"]
    text = feedback[0]["payload"]["feedback"]
    assert "notes.txt" in text and "two" in text and "five" in text
    # the repair's worktree started from the integrated head, which has the second task's line
    requested = [e["payload"] for e in world.events("WorktreeRequested") if e["payload"]["task_id"] == "q1.t5"]
    assert len(requested) == 2 and requested[1]["base"] != requested[0]["base"]
    assert "two" in git(world.repo, "show", f"{requested[1]['base']}:notes.txt")
    # the stale workspace was really removed, and the new one made at the integrated head (issue 35 item 7)
    removed = [e["payload"] for e in world.events("WorktreeRemoved") if e["payload"]["task_id"] == "q1.t5"]
    assert [r["result"] for r in removed] == ["removed"], removed
    created = [e["payload"] for e in world.events("WorktreeCreated") if e["payload"]["task_id"] == "q1.t5"]
    assert [c["head"] for c in created] == [r["base"] for r in requested]
    if workspace_root is not None:
        assert all(Path(r["path"]).is_relative_to(workspace_root) for r in requested), requested
    # both append after the same line: warned once, by lines (the repair, made on the integrated head that holds the
    # second task's line, meets it no more); the conflict was foreseen as the fifth was queued, the second merged
    assert summary["overlaps"] == [{"first_task": "q1.t2", "second_task": "q1.t5", "paths": ["notes.txt"],
                                   "whole_files": []}]
    queued = [e["payload"] for e in world.events("IntegrationStepQueued") if e["payload"]["task_id"] == "q1.t5"]
    assert [q["predicted_conflicts"] for q in queued] == [["notes.txt"], []]


def test_a_conflicting_task_whose_cycles_are_spent_is_reported_undelivered_naming_the_path(tmp_path):
    world = _world(tmp_path, FIVE)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    done = world.run("go", "--goal", "five", "--tasks", "tasks.toml", "--target", "main", "--id", "q2", "--parallel",
                     "1", "--cycles", "1", "--key", f"{keys}.key", "--json")
    summary = json.loads(done.stdout)
    assert done.returncode == 6, (done.stdout, done.stderr)
    assert [row["result"] for row in summary["tasks"]] == ["delivered"] * 4 + ["failed"]
    assert world.file_at("main", "notes.txt") == "notes\ntwo\n"
    assert world.file_at("main", "four.txt") == "four\n"
    five = summary["tasks"][4]
    assert five["code"] == "integration-conflict"
    assert [c["paths"] for c in five["conflicts"]] == [["notes.txt"]]
    text = world.run("go", "--resume", "q2").stdout
    assert "t5" in text and "notes.txt" in text
    sealed = world.events("ReceiptSealed")[0]["payload"]["receipt"]
    assert [t["task_id"] for t in sealed["undelivered"]] == ["q2.t5"]
    assert sealed["undelivered"][0]["paths"] == ["notes.txt"]
    assert sorted(t["task_id"] for t in sealed["tasks"]) == ["q2.t1", "q2.t2", "q2.t3", "q2.t4"]
    verified = world.run("verify-receipt", summary["receipt"]["path"], "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stderr


SLOW = '''\
[[tasks]]
id = "fast"
title = "fast"
prompt = "write fast.txt: fast"

[[tasks]]
id = "slow"
title = "slow"
prompt = """wait for go.flag
delete go.flag
write slow.txt: slow
"""
'''


def test_the_target_moves_while_another_task_is_still_running(tmp_path):
    world = _world(tmp_path, SLOW, idle_timeout="5m")
    process = world.start("go", "--goal", "two", "--tasks", "tasks.toml", "--target", "main", "--id", "q3",
                          "--json")
    try:
        def slow_worktree() -> str | None:
            for event in world.events("WorktreeCreated"):
                if event["payload"]["task_id"] == "q3.slow":
                    return event["payload"]["path"]
            return None

        def delivered_fast() -> bool:
            return git(world.repo, "ls-tree", "--name-only", "main").split().count("fast.txt") == 1

        assert wait_until(lambda: slow_worktree() is not None, timeout=60)
        moved = wait_until(delivered_fast, timeout=60, step=0.2)
        assert moved, "the target did not move while the slow task's agent was running"
        assert not (Path(slow_worktree()) / "slow.txt").exists()  # its agent is still waiting
        (Path(slow_worktree()) / "go.flag").write_text("go\n")
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, (out, err)
    summary = json.loads(out)
    assert [row["result"] for row in summary["tasks"]] == ["delivered", "delivered"]
    assert world.file_at("main", "slow.txt") == "slow\n"
    assert world.file_at("main", "fast.txt") == "fast\n"


def test_killed_before_a_repair_then_resumed_repairs_and_delivers(tmp_path):
    world = _world(tmp_path, FIVE)
    argv = ("go", "--goal", "five", "--tasks", "tasks.toml", "--target", "main", "--id", "q4", "--parallel", "1",
            "--json")
    crashed = world.run(*argv, fault=REPAIR_POINTS[0])
    assert crashed.returncode == -9, crashed.stderr
    done = world.run(*argv)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert world.file_at("main", "notes.txt") == "notes\ntwo\nfive\n"
    assert len(world.events("ReceiptSealed")) == 1
    assert world.run("verify").returncode == 0
    reconcile = world.json("reconcile")
    assert reconcile["findings"] == [] and reconcile["git"] == []
