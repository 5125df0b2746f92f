"""The pure decisions under docket go: the plan recorded once, the budget's end, a task's feedback and finish."""

from __future__ import annotations

import pytest

from docket.domain import run, task
from docket.domain.kernel.errors import Refused

from .builders import T0, Book, at

PLAN = [("r1.a", []), ("r1.b", ["r1.a"])]


def test_the_plan_is_recorded_once_and_a_different_one_is_refused():
    book = Book()
    r = book.active_run()
    r = book.apply(run.apply, r, run.plan_run(r, PLAN, "scripted", 3, 2, T0))
    assert r.plan is not None and r.plan.task_ids == ("r1.a", "r1.b") and r.plan.depends_on("r1.b") == ("r1.a",)
    assert run.plan_run(r, PLAN, "scripted", 3, 2, T0) == []  # the same plan again: nothing
    for changed in ((PLAN[:1], "scripted", 3, 2), (PLAN, "other", 3, 2), (PLAN, "scripted", 4, 2)):
        with pytest.raises(Refused) as caught:
            run.plan_run(r, *changed, T0)
        assert caught.value.code == "plan-differs"


def test_the_plan_records_the_export_key_and_a_v1_plan_without_one_still_folds():
    from docket.domain import events as ev

    book = Book()
    r = book.active_run()
    key = ("ab" * 32, "/home/u/.docket/signing.key")
    (planned,) = run.plan_run(r, PLAN, "scripted", 3, 2, T0, key)
    assert planned.type_name() == "RunPlanned.v2" and planned.export_key == ev.ExportKey(keyid=key[0], path=key[1])
    assert book.apply(run.apply, r, [planned]).plan.export_key == key
    legacy = ev.RunPlanned(stream=planned.stream, version=planned.version, recorded_at=T0, run_id=r.run_id,
                           tasks=planned.tasks, agent="scripted", cycles=3, parallel=2)
    assert book.apply(run.apply, r, [legacy]).plan.export_key is None


def test_the_budget_ends_the_run_only_once_it_is_spent_and_only_while_it_is_supervised():
    book = Book()
    r = book.active_run(budget_ms=60_000, supervised=True)
    assert run.exhaust_budget(r, at(59_999)) == []
    events = run.exhaust_budget(r, at(60_000))
    assert [e.type_name() for e in events] == ["RunBudgetExhausted.v1"]
    spent = book.apply(run.apply, r, events)
    assert spent.status == "budget-limited" and run.exhaust_budget(spent, at(70_000)) == []
    with pytest.raises(Refused):
        run.require_open(spent)
    unsupervised = Book().active_run(budget_ms=60_000)
    assert run.exhaust_budget(unsupervised, at(3_600_000)) == []  # nobody supervised it: nothing was billed
    assert run.exhaust_budget(Book().active_run(supervised=True), at(3_600_000)) == []  # no budget at all


def test_feedback_is_recorded_once_per_generation_bounded_and_finishing_counts_the_cycles():
    book = Book()
    r = book.active_run()
    t = book.task(r)
    long = "x" * 10_000
    t = book.apply(task.apply, t, task.record_feedback(t, r, generation=1, code="check-failed", check="tests",
                                                       binding_id=None, feedback=long, now=T0))
    assert task.record_feedback(t, r, generation=1, code="check-failed", check=None, binding_id=None,
                                feedback="again", now=T0) == []
    assert len(t.feedback[0].feedback) == task.MAX_FEEDBACK_CHARS and t.feedback[0].feedback.endswith("x")
    done = task.finish(t, r, result="passed", binding_id="b" * 64, code=None, message=None, now=T0)
    assert done[0].cycles == 2  # one failed, one passed
    t = book.apply(task.apply, t, done)
    assert t.result == "passed" and task.finish(t, r, result="failed", binding_id=None, code="x", message=None,
                                                now=T0) == []
    with pytest.raises(Refused):
        task.record_feedback(t, r, generation=2, code="c", check=None, binding_id=None, feedback="f", now=T0)


def test_the_retry_prompt_keeps_the_task_and_adds_the_last_failure():
    first = task.Feedback(1, "agent-idle-timeout", None, None, "printed nothing")
    second = task.Feedback(2, "check-failed", "tests", None, "assert 1 == 2")
    prompt = task.retry_prompt("do the thing", (first, second))
    assert prompt.startswith("do the thing\n") and "generation 2" in prompt and "the check tests failed" in prompt
    assert "assert 1 == 2" in prompt and "printed nothing" not in prompt
    assert task.retry_prompt("do the thing", ()) == "do the thing"
