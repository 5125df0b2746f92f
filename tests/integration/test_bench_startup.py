"""The startup benchmark at its smallest: every command runs, each timed plan appends its task, no time asserted."""

from bench import startup


def test_the_startup_benchmark_measures_every_command_and_plans_a_task_each_round():
    rows = startup.measure(1)  # raises when the ledger holds another number of planned tasks than plans were run
    figures = {row.figure.split(",")[0]: row for row in rows}
    plan = figures["'docket task plan' (one event appended)"]
    assert plan.value > 0 and plan.ratio > 0 and plan.passed in (True, False)
    assert all(row.value is not None and row.value > 0 for row in rows)
    assert any(row.figure.startswith("(information) the same, CPU time") for row in rows)
