"""The board's outcome (projections/board.py, domain/reports/outcome.py) from the views alone: what the target holds, what
waits for a person, whether a docket process still drives the run; and the integration said by what it delivered."""

from __future__ import annotations

import json

from docket.projections.board import integration_summary, run_board

from .test_board import B1, B2, T0, at, conn, insert, run, task  # noqa: F401  (conn: the fixture)

PLAN = [{"task_id": "t1", "depends_on": []}, {"task_id": "t2", "depends_on": []}]


def delivered_steps(conn, count: int) -> None:  # noqa: ANN001
    """An integration that moved the target to the merge of its step ``count`` (of two verified steps)."""
    insert(conn, "integrations", run_id="r1", status="completed", prepared=1, steps=2, steps_merged=2,
           steps_verified=2, target_branch="main", final_commit=f"m{count}" if count else "elsewhere", position=60)
    for step, (task_id, binding) in enumerate((("t1", B1), ("t2", B2)), 1):
        insert(conn, "integration_steps", run_id="r1", step=step, task_id=task_id, binding_id=binding,
               status="verified", merge_commit=f"m{step}", generation=1, position=50 + step)


def outcome(conn, now: str = at(10)):  # noqa: ANN001, ANN201
    board = run_board(conn, "r1", now)
    assert board is not None and board.outcome is not None
    return board.outcome


def test_a_completed_run_whose_target_holds_every_task_is_delivered(conn):  # noqa: F811
    run(conn, status="completed", plan=PLAN)
    task(conn, "t1", 2, result="passed")
    task(conn, "t2", 3, result="passed")
    delivered_steps(conn, 2)
    assert (outcome(conn).line, outcome(conn).delivered, outcome(conn).tasks) == ("delivered", 2, 2)
    assert run_board(conn, "r1", at(10)).integration == "completed, 2 task(s) delivered"  # not "2/2 step(s)"


def test_a_completed_run_whose_target_holds_one_of_two_tasks_is_partly_delivered(conn):  # noqa: F811
    run(conn, status="completed", plan=PLAN)
    task(conn, "t1", 2, result="passed")
    task(conn, "t2", 3, result="passed")
    delivered_steps(conn, 1)
    assert outcome(conn).line == "partly delivered (1 of 2)"


def test_a_completed_run_every_task_of_which_failed_is_nothing_delivered(conn):  # noqa: F811
    run(conn, status="completed", plan=PLAN)
    task(conn, "t1", 2, result="failed")
    task(conn, "t2", 3, result="failed")
    assert (outcome(conn).state, outcome(conn).words) == ("nothing-delivered", "nothing delivered")


def test_a_planned_run_runs_while_its_driver_lease_holds_and_is_stopped_once_it_ran_out(conn):  # noqa: F811
    """A docket go killed outright leaves its supervision open: its driver lease, renewed or given up, says."""
    run(conn, plan=PLAN, supervisions=json.dumps(["s1"]))
    task(conn, "t1", 2)
    task(conn, "t2", 3)
    insert(conn, "leases", resource="driver/r1", run_id="r1", worker_id="s1", generation=1, token=5, status="held",
           granted_at=T0, expires_at=at(60), position=5)
    assert outcome(conn, at(30)).state == "running"
    assert outcome(conn, at(61)).state == "stopped"  # no one renewed it


def test_a_run_driven_by_hand_is_running_until_it_closes(conn):  # noqa: F811
    run(conn)
    task(conn, "t1", 2)
    assert outcome(conn).line == "running"


def test_an_open_question_makes_an_open_run_wait_for_you(conn):  # noqa: F811
    run(conn, plan=PLAN)
    task(conn, "t1", 2)
    insert(conn, "requests", request_key="q1", kind="ask", status="open", run_id="r1", task_id="t1",
           worker_id="t1", generation=1, request_id="q", asked_at=T0, refusals=0, answers_refused=0, position=7)
    said = outcome(conn)
    assert (said.line, said.needs_you) == ("waiting for you", True)


def test_a_run_that_waits_for_its_user_after_docket_go_ended_waits_for_you(conn):  # noqa: F811
    run(conn, plan=PLAN, waiting_code="target-checked-out", waiting_message="move them")
    task(conn, "t1", 2)
    assert outcome(conn).needs_you is True


def test_the_integration_stopped_without_a_step_or_a_code_says_no_none():
    """Issue 35: `docket status` printed `integration: stopped (None)`."""
    integration = {"status": "stopped", "prepared": 1, "steps_verified": 0, "steps": 2, "target_branch": "main",
                   "stopped_step": None, "stop_code": None, "target_code": None, "target": None}
    assert integration_summary(integration) == "stopped, 0/2 step(s) verified"
    assert integration_summary(integration, 0) == "stopped, 0 task(s) delivered"
    stopped = integration | {"stopped_step": 2, "stop_code": "conflicted"}
    assert integration_summary(stopped, 1) == "stopped at step 2 (conflicted), 1 task(s) delivered"
