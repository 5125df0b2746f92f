"""The live view (cli/console/live.py) says what a run came to in the words of domain/reports/outcome.py, and at 80 columns tells
its tasks apart by their own ids (issue 35: two tasks both read `run-phba83be.d…`)."""

from __future__ import annotations

import io

from rich.console import Console

from docket.cli.console.live import board_lines, board_table
from docket.domain.reports.outcome import run_outcome
from docket.projections.board import Board, TaskLine

RUN = "run-phba83be"


def task(own: str, state: str) -> TaskLine:
    return TaskLine(task_id=f"{RUN}.{own}", title=own, state=state, generation=1, elapsed_ms=61_000,
                    last_line="compiling the documentation for the second time " * 3, cycles=1, candidate="c" * 12,
                    checks="1/1 passed", depends_on=(), step=None)


def board(**more: object) -> Board:
    values = dict(run_id=RUN, goal="write the docs", status="completed", closed=True, target_branch="main",
                  budget_ms=None, used_ms=120_000, remaining_ms=None, integration="completed, 0 task(s) delivered",
                  target_commit=None, receipt_sealed=False, receipt_sha256=None,
                  tasks=(task("docs-readme", "failed"), task("docs-guide", "failed")),
                  outcome=run_outcome("completed", 0, 2))
    return Board(**(values | more))


def drawn(table: object, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, markup=False, emoji=False).print(table)
    return out.getvalue()


def test_at_80_columns_each_task_shows_its_own_id_whole():
    text = drawn(board_table(board()))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "docs-readme" in text and "docs-guide" in text, text
    assert f"{RUN}.d" not in text  # not the run's id, cut where every task's id looks the same
    rows = [line for line in text.splitlines() if "docs-" in line]
    assert all(" failed " in row and " 1m1s " in row for row in rows), text  # a long last line narrows itself


def test_plain_lines_name_each_task_by_its_own_id():
    lines = board_lines(board())
    assert lines[1].startswith("  docs-readme ") and lines[2].startswith("  docs-guide ")


def test_a_run_that_delivered_nothing_reads_so_not_completed():
    assert board_lines(board())[0].startswith(f"run {RUN}: nothing delivered, ")
    assert "completed," not in board_lines(board())[0].split(" integration ")[0]


def test_a_run_waiting_for_a_person_is_marked():
    waiting = board(status="active", closed=False, outcome=run_outcome("active", 1, 2, needs_you=True))
    assert board_lines(waiting)[0].startswith(f"run {RUN}: waiting for you (1 of 2 delivered) [needs you], ")
    assert "[needs you]" in drawn(board_table(waiting), width=200)
