"""What `docket status` and `docket watch --once` say of a run, through the real CLI: only what the ledger proves (a
task is delivered once the target holds its merge, not before), in words that do not repeat themselves, naming what
the user must act on (a conflicting task and its paths, a checkout in the target's way)."""

from __future__ import annotations

import signal

from ..conftest import git
from .test_integration import RUN, make_world, offered, payloads, tip

MAIN = "refs/heads/main"


def states(docket) -> dict[str, str]:  # noqa: ANN001
    return {t["task_id"]: t["state"] for t in docket("watch", RUN, "--json").json()["tasks"]}


def test_a_conflict_names_the_task_its_paths_and_the_overlap_warned_at_prepare_and_nothing_is_delivered(docket):
    make_world(docket)
    first = offered(docket, "t1", "echo one > same.txt")
    second = offered(docket, "t2", "echo two > same.txt")
    assert docket("integrate", RUN, check=False).returncode == 3
    status = docket("status", RUN).stdout
    assert "conflicted (conflicted)" not in status
    assert f"    step 2: task t2, candidate {second['binding_id'][:12]}: conflicted in same.txt; t1 changed the same " \
           "paths\n" in status
    assert f"    step 1: task t1, candidate {first['binding_id'][:12]}: merged (target not moved), the queue stopped " \
           "at step 2 (conflicted)\n" in status
    assert "    same paths: t1 and t2 both change same.txt\n" in status
    assert "  action needed: task t2 not delivered: conflicted in same.txt; t1 changed the same paths\n" in status
    assert "  task t1: t1, merged (target not moved), the queue stopped at step 2 (conflicted)\n" in status
    assert "  integration: stopped at step 2 (conflicted), 0 task(s) delivered\n" in status
    doc = docket("status", RUN, "--json").json()
    assert doc["attention"] == ["task t2 not delivered: conflicted in same.txt; t1 changed the same paths"]
    assert [s["delivered"] for s in doc["integration_steps"]] == [False, False]
    assert doc["integration"]["overlaps"] == [{"first_task": "t1", "second_task": "t2", "paths": ["same.txt"], "whole_files": []}]

    assert states(docket) == {"t1": "merged (target not moved)", "t2": "conflicted"}
    board = docket("watch", RUN, "--once").stdout
    assert "integrated" not in board and "delivered" not in board.replace("not delivered", "").replace(
        "0 task(s) delivered", "")
    assert board.startswith("run r1: waiting for you [needs you], ")  # a run driven by hand: the conflict is yours
    assert "  action needed: task t2 not delivered: conflicted in same.txt; t1 changed the same paths\n" in board
    listing = docket("status").stdout
    assert "  action needed: task t2 not delivered: conflicted in same.txt" in listing


def test_a_checkout_in_the_targets_way_is_named_until_it_is_cleared_and_then_the_tasks_are_delivered(docket):
    make_world(docket, target="main", commit_config=True)
    offered(docket, "t1", "echo one > a.txt")
    offered(docket, "t2", "echo two > b.txt")
    crashed = docket("integrate", RUN, fault="effector:before-observe@IntegrationTargetRequested.v2")
    assert crashed.returncode == -signal.SIGKILL
    (docket.cwd / "README.md").write_text("mine\n")
    assert docket("integrate", RUN, check=False).returncode == 3
    (moved,) = payloads(docket, "IntegrationTargetMoved.v1")
    assert moved["code"] == "target-checked-out"

    status = docket("status", RUN).stdout
    (todo,) = [line for line in status.splitlines() if line.startswith("  action needed: ")]
    assert todo.startswith(f"  action needed: main was not moved: the target branch main is checked out in {docket.cwd}")
    assert "unstaged README.md" in todo and todo.endswith(f"then run 'docket integrate {RUN}' again")
    assert "  integration: 2/2 step(s) verified, main not moved (target-checked-out)\n" in status
    assert states(docket) == {"t1": "merged (target not moved)", "t2": "merged (target not moved)"}
    assert todo.strip() in docket("watch", RUN, "--once").stdout

    git(docket.cwd, "checkout", "-q", "--", "README.md")
    done = docket("integrate", RUN, "--json").json()
    assert done["status"] == "completed" and tip(docket, MAIN) == done["final_commit"]
    status = docket("status", RUN).stdout
    assert "action needed" not in status and "  task t1: t1, delivered\n" in status
    assert f"  integration: completed, 2 task(s) delivered, main at {done['final_commit'][:12]}" in status
    assert states(docket) == {"t1": "delivered", "t2": "delivered"}
    assert [s["delivered"] for s in docket("status", RUN, "--json").json()["integration_steps"]] == [True, True]


def test_a_workers_exit_and_a_checks_failure_are_said_once_with_their_codes(docket):
    make_world(docket, checks='[checks.ok]\ncommand = ["sh", "-c", "exit 3"]\n')
    candidate = docket("worker", "launch", RUN, "--task", "t1", "--json", "--", "sh", "-c",
                       "echo one > a.txt").json()["pin"]["candidate"]
    docket("check", "run", candidate["binding_id"], check=False)
    status = docket("status", RUN).stdout
    (worker,) = [line for line in status.splitlines() if line.startswith("  worker t1:")]
    assert ", exited with code 0" in worker and "exited (exited" not in worker
    assert "      check ok: failed (exit 3)\n" in status
