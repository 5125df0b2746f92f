"""The board (projections/board.py): each task's state, generation, elapsed time, output line, cycles, candidate and
checks, and the run's line, derived from the views' tables alone (here filled in memory, row by row)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from docket.domain.kernel.values import from_ms, to_ms
from docket.projections.board import run_board
from docket.projections.views import Views

T0 = "2026-01-01T00:00:00.000Z"
B1, B2 = "1" * 64, "2" * 64


def at(seconds: float) -> str:
    return from_ms(to_ms(T0) + int(seconds * 1000))


@pytest.fixture
def conn() -> sqlite3.Connection:
    views = Views(sqlite3.connect(":memory:", isolation_level=None))
    views.ensure_schema()
    return views.conn


def insert(conn: sqlite3.Connection, table: str, **row: object) -> None:
    conn.execute(f"INSERT INTO {table} ({', '.join(f'[{k}]' for k in row)}) VALUES ({', '.join('?' * len(row))})",
                 tuple(row.values()))


def run(conn, status="active", plan=None, budget_ms=None, supervisions="[]", **more) -> None:  # noqa: ANN001
    insert(conn, "runs", run_id="r1", goal="g", target_branch="main", budget_ms=budget_ms, status=status,
           opened_at=T0, used_ms=0, supervisions=supervisions, position=1,
           plan=json.dumps({"tasks": plan, "agent": "a", "cycles": 3, "parallel": 2}) if plan else None, **more)


def task(conn, task_id: str, position: int, **more) -> None:  # noqa: ANN001
    insert(conn, "tasks", task_id=task_id, run_id="r1", title=f"title {task_id}", planned_at=T0, position=position,
           **more)


def worker(conn, task_id: str, status: str, generation: int = 1, **more) -> None:  # noqa: ANN001
    insert(conn, "workers", worker_id=task_id, run_id="r1", role="implementer", task_id=task_id,
           generation=generation, registered_at=T0, position=10, status=status, **more)


def candidate(conn, task_id: str, binding: str, status: str = "pinned", generation: int = 1, **more) -> None:  # noqa: ANN001
    insert(conn, "candidates", binding_id=binding, run_id="r1", task_id=task_id, worker_id=task_id,
           generation=generation, boundary="exit", status=status, position=20, **more)


def check(conn, binding: str, name: str, status: str, attempt: int = 1, position: int = 30) -> None:  # noqa: ANN001
    insert(conn, "checks", check_id=f"{binding[:4]}-{name}-{attempt}", binding_id=binding, run_id="r1", task_id="t1",
           check=name, attempt=attempt, required=1, status=status, position=position)


def states(board) -> dict[str, str]:  # noqa: ANN001
    return {t.task_id: t.state for t in board.tasks}


def test_an_unknown_run_has_no_board(conn):
    assert run_board(conn, "nope", T0) is None


def test_tasks_come_in_plan_order_waiting_on_what_they_depend_on_until_it_passes(conn):
    run(conn, plan=[{"task_id": "t2", "depends_on": []}, {"task_id": "t1", "depends_on": ["t2"]}])
    task(conn, "t2", 3)
    task(conn, "t1", 4)
    board = run_board(conn, "r1", T0)
    assert [t.task_id for t in board.tasks] == ["t2", "t1"]
    assert states(board) == {"t2": "queued", "t1": "waiting"}
    assert board.tasks[1].depends_on == ("t2",)
    conn.execute("UPDATE tasks SET result = 'passed', cycles = 1 WHERE task_id = 't2'")
    assert states(run_board(conn, "r1", T0)) == {"t2": "passed", "t1": "queued"}


def test_a_task_of_a_run_no_docket_go_planned_is_not_started_until_its_worker_is_launched(conn):
    run(conn)  # tasks planned one by one ('docket task plan'): nothing launches them but the user
    task(conn, "t1", 3)
    assert states(run_board(conn, "r1", T0)) == {"t1": "not started"}


def test_a_workers_generation_is_launching_running_exited_then_queued_once_judged_failed(conn):
    run(conn)
    task(conn, "t1", 3)
    worker(conn, "t1", "launching", log_path="/logs/t1/1.log")
    assert states(run_board(conn, "r1", T0)) == {"t1": "launching"}
    conn.execute("UPDATE workers SET status = 'running', launched_at = ? WHERE worker_id = 't1'", (at(0),))
    read = []
    board = run_board(conn, "r1", at(75), tail=lambda path: read.append(path) or "compiling 3/9")
    (line,) = board.tasks
    assert (line.state, line.generation, line.elapsed_ms, line.last_line) == ("running", 1, 75_000, "compiling 3/9")
    assert read == ["/logs/t1/1.log"]  # a running generation's line comes from its log
    conn.execute("UPDATE workers SET status = 'exited', ended_at = ?, tail_line = 'done' WHERE worker_id = 't1'",
                 (at(90),))
    (line,) = run_board(conn, "r1", at(500), tail=lambda path: pytest.fail("an ended generation's log is read")).tasks
    assert (line.state, line.elapsed_ms, line.last_line) == ("exited", 90_000, "done")
    conn.execute("UPDATE tasks SET failed_cycles = 1, judged_generation = 1 WHERE task_id = 't1'")  # its feedback recorded
    (line,) = run_board(conn, "r1", at(500)).tasks
    assert (line.state, line.cycles) == ("queued", 1)
    conn.execute("UPDATE workers SET status = 'running', generation = 2, launched_at = ?, ended_at = NULL, "
                 "tail_line = NULL WHERE worker_id = 't1'", (at(600),))
    (line,) = run_board(conn, "r1", at(610), tail=lambda path: None).tasks
    assert (line.state, line.generation, line.elapsed_ms, line.last_line) == ("running", 2, 10_000, None)


def test_checking_while_its_candidate_is_pinned_or_a_check_runs_and_the_latest_attempt_of_each_check_counts(conn):
    run(conn)
    task(conn, "t1", 3)
    worker(conn, "t1", "exited", launched_at=at(0), ended_at=at(5))
    candidate(conn, "t1", B1, status="pinning")
    (line,) = run_board(conn, "r1", at(6)).tasks
    assert (line.state, line.candidate, line.checks) == ("checking", B1[:12], None)
    conn.execute("UPDATE candidates SET status = 'pinned'")
    check(conn, B1, "lint", "passed", position=30)
    check(conn, B1, "test", "failed", position=31)
    check(conn, B1, "test", "requested", attempt=2, position=32)
    (line,) = run_board(conn, "r1", at(7)).tasks
    assert (line.state, line.checks) == ("checking", "1/2 passed, 1 requested")  # asked for, not launched yet
    conn.execute("UPDATE checks SET status = 'running' WHERE attempt = 2")
    (line,) = run_board(conn, "r1", at(7)).tasks
    assert (line.state, line.checks) == ("checking", "1/2 passed, 1 running")
    conn.execute("UPDATE checks SET status = 'failed' WHERE attempt = 2")
    (line,) = run_board(conn, "r1", at(8)).tasks
    assert (line.state, line.checks) == ("exited", "1/2 passed, 1 failed")


def test_the_candidate_shown_is_the_one_that_finished_the_task_else_the_latest_that_is_the_tasks_own(conn):
    run(conn)
    task(conn, "t1", 3)
    worker(conn, "t1", "exited", generation=2)
    candidate(conn, "t1", B1, generation=1)
    candidate(conn, "t1", B2, generation=2)
    insert(conn, "candidates", binding_id="3" * 64, run_id="r1", task_id="t1", boundary="integration-1",
           status="pinned", position=40)  # the merge queue's pin of a merged tree is not the task's work
    assert run_board(conn, "r1", T0).tasks[0].candidate == B2[:12]
    conn.execute("UPDATE tasks SET result = 'passed', cycles = 1, passed_candidate = ? WHERE task_id = 't1'", (B1,))
    (line,) = run_board(conn, "r1", T0).tasks
    assert (line.state, line.candidate, line.cycles) == ("passed", B1[:12], 1)


def test_finished_tasks_keep_their_result_until_their_step_goes_further(conn):
    """(tests/unit/test_board_ledger.py follows the queue event by event: delivered only once the target moved.)"""
    run(conn, status="completed", closed_at=at(60))
    for n, result in ((1, "passed"), (2, "passed"), (3, "failed"), (4, "passed")):
        task(conn, f"t{n}", n + 2, result=result, cycles=n)
    insert(conn, "integrations", run_id="r1", status="completed", prepared=1, steps=3, steps_merged=0,
           steps_verified=1, approvals=0, target_branch="main", final_commit="c" * 40, receipt_sha256="d" * 64,
           target="completed", position=50)
    insert(conn, "integration_steps", run_id="r1", step=1, task_id="t1", binding_id=B1, status="verified",
           merge_commit="c" * 40, position=50)
    insert(conn, "integration_steps", run_id="r1", step=2, task_id="t2", binding_id=B2, status="merging", position=50)
    insert(conn, "integration_steps", run_id="r1", step=3, task_id="t4", binding_id="4" * 64, status="waiting",
           position=50)
    board = run_board(conn, "r1", at(60))
    assert states(board) == {"t1": "delivered", "t2": "merging", "t3": "failed", "t4": "passed"}
    assert [t.step for t in board.tasks] == ["verified", "merging", None, "waiting"]
    assert (board.status, board.closed, board.integration) == ("completed", True, "completed, 1 task(s) delivered")
    assert (board.target_commit, board.receipt_sealed, board.receipt_sha256) == ("c" * 40, True, "d" * 64)


def test_a_closed_run_stops_what_had_not_finished(conn):
    run(conn, status="budget-limited", closed_at=at(60))
    task(conn, "t1", 3, result="passed", cycles=1)
    task(conn, "t2", 4)
    worker(conn, "t2", "running", launched_at=at(0))
    task(conn, "t3", 5)
    board = run_board(conn, "r1", at(60), tail=lambda path: None)
    assert states(board) == {"t1": "passed", "t2": "stopped", "t3": "stopped"}
    assert board.closed and board.integration == "unprepared" and not board.receipt_sealed


def test_the_run_line_counts_the_budget_up_to_now_while_supervised(conn):
    run(conn, budget_ms=3_600_000, active_since=at(0), supervisions='["s1"]')
    board = run_board(conn, "r1", at(600))
    assert (board.used_ms, board.remaining_ms, board.budget_ms) == (600_000, 3_000_000, 3_600_000)
    doc = board.document()
    assert doc["tasks"] == [] and doc["run_id"] == "r1" and json.dumps(doc)


def question(conn, key: str, generation: int = 1, status: str = "open", position: int = 40) -> None:  # noqa: ANN001
    insert(conn, "requests", request_key=key, kind="ask", status=status, run_id="r1", task_id="t1", worker_id="t1",
           generation=generation, request_id=key, asked_at=T0, reason="blocked", question="q?", choices="[]",
           refusals=0, answers_refused=0, position=position)


def test_a_task_whose_current_generation_asked_is_awaiting_input_until_answered(conn):
    run(conn, plan=[{"task_id": "t1", "depends_on": []}])
    task(conn, "t1", 1)
    worker(conn, "t1", "running", generation=2)
    question(conn, "req-aaaaaaaaaaaaaaaa", generation=1)  # an earlier generation's question: not this one's
    assert run_board(conn, "r1", at(1)).tasks[0].state == "running"
    question(conn, "req-bbbbbbbbbbbbbbbb", generation=2, position=41)
    assert run_board(conn, "r1", at(1)).tasks[0].state == "awaiting-input"
    conn.execute("UPDATE workers SET status = 'exited' WHERE worker_id = 't1'")
    assert run_board(conn, "r1", at(1)).tasks[0].state == "awaiting-input"  # ended asking: still waits for it
    conn.execute("UPDATE requests SET status = 'answered' WHERE request_key = 'req-bbbbbbbbbbbbbbbb'")
    assert run_board(conn, "r1", at(1)).tasks[0].state == "exited"
