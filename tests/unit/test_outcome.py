"""The one rule a run's outcome is worded by (domain/reports/outcome.py): the same words on every surface."""

from __future__ import annotations

import pytest

from docket.domain.reports.outcome import STATES, run_outcome


@pytest.mark.parametrize(("status", "delivered", "tasks", "needs_you", "driven", "state", "line"), [
    ("completed", 3, 3, False, True, "delivered", "delivered"),
    ("completed", 2, 3, False, True, "partly-delivered", "partly delivered (2 of 3)"),
    ("completed", 0, 3, False, True, "nothing-delivered", "nothing delivered"),  # every task failed
    ("completed", 0, 0, False, True, "nothing-delivered", "nothing delivered"),  # no task at all
    ("failed", 0, 2, False, True, "nothing-delivered", "nothing delivered"),  # its base could not be pinned
    ("aborted", 0, 3, False, True, "stopped", "stopped"),
    ("aborted", 1, 3, False, True, "stopped", "stopped (1 of 3 delivered)"),
    ("budget-limited", 2, 3, False, True, "stopped", "stopped (2 of 3 delivered)"),
    ("paused", 0, 3, False, True, "stopped", "stopped"),
    ("active", 0, 3, False, False, "stopped", "stopped"),  # docket go interrupted: nothing drives it
    ("active", 1, 3, True, True, "waiting-for-you", "waiting for you (1 of 3 delivered)"),
    ("active", 0, 3, True, False, "waiting-for-you", "waiting for you"),  # docket go ended waiting
    ("paused", 0, 3, True, True, "waiting-for-you", "waiting for you"),
    ("opening", 0, 0, False, True, "running", "running"),
    ("active", 1, 3, False, True, "running", "running (1 of 3 delivered)"),
])
def test_each_status_reads_as_what_it_came_to(status, delivered, tasks, needs_you, driven, state, line):
    outcome = run_outcome(status, delivered, tasks, needs_you=needs_you, driven=driven)
    assert (outcome.state, outcome.line) == (state, line) and outcome.state in STATES
    assert outcome.needs_you is (state == "waiting-for-you")


@pytest.mark.parametrize("status", ["completed", "aborted", "budget-limited", "failed"])
def test_a_closed_run_never_waits_for_anyone(status):
    """What a closed run came to is final: a stale question or attention item does not make it 'waiting for you'."""
    outcome = run_outcome(status, 0, 2, needs_you=True)
    assert not outcome.needs_you and outcome.state != "waiting-for-you"


def test_a_run_where_every_task_failed_is_not_shown_as_a_success():
    """Issue 35: a completed run with nothing delivered read 'completed' (green) while docket go said failed."""
    outcome = run_outcome("completed", 0, 2)
    assert outcome.words == "nothing delivered" and "complet" not in outcome.line


def test_the_json_shape_is_stable():
    assert run_outcome("completed", 2, 3).document() == {
        "state": "partly-delivered", "words": "partly delivered (2 of 3)", "detail": None, "delivered": 2,
        "tasks": 3, "needs_you": False}
    assert run_outcome("aborted", 1, 3).document()["detail"] == "1 of 3 delivered"


def test_counts_out_of_range_are_bounded():
    assert run_outcome("completed", 5, 3).line == "delivered"
    assert run_outcome("completed", -1, 3).line == "nothing delivered"
