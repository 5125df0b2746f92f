"""A worker's requests and a question's answer, decided by domain.requests: once, and the same reply after."""

from __future__ import annotations

import pytest

from docket.domain import requests as rq
from docket.domain import run as run_aggregate
from docket.domain.kernel.errors import BadInput, NotFound, Refused, RunClosed

from .builders import Book, T0, at

BINDING = rq.Binding(run_id="r1", task_id="r1.t1", worker_id="r1.t1", generation=2)
ASK = {"question": "Which database?", "reason": "choice", "choices": ["sqlite", "postgres"]}


def received(book, existing, kind, raw, *, current=2, policy=rq.InboxPolicy(), run=None, request_id="q1", now=T0):
    run = run or book.active_run()
    events = rq.receive(existing, current, run, BINDING, request_id, kind, raw, policy, now)
    return events, book.apply(rq.apply, existing, events) if events else existing


def test_the_key_is_the_worker_generation_and_request_id_and_nothing_else():
    key = rq.request_key("r1.t1", 2, "q1")
    assert key.startswith("req-") and len(key) == 20
    assert key == rq.request_key("r1.t1", 2, "q1")
    assert len({key, rq.request_key("r1.t1", 3, "q1"), rq.request_key("r1.t2", 2, "q1"),
                rq.request_key("r1.t1", 2, "q2")}) == 4


def test_a_question_is_recorded_once_and_waits_for_its_answer():
    book = Book()
    events, question = received(book, None, "ask", ASK)
    (asked,) = events
    assert type(asked).name == "QuestionAsked"
    assert (asked.worker_id, asked.generation, asked.request_id, asked.choices) == ("r1.t1", 2, "q1",
                                                                                    ["sqlite", "postgres"])
    assert rq.reply(question, "ask", ASK).document() == {"status": "waiting", "request": question.key}
    again, _ = received(book, question, "ask", ASK)
    assert again == []  # the same id, the same content: one request


def test_the_same_id_with_other_content_is_refused_and_the_refusal_recorded_once():
    book = Book()
    _, question = received(book, None, "ask", ASK)
    other = {**ASK, "question": "Which cache?"}
    events, question = received(book, question, "ask", other)
    assert [(type(e).name, e.code) for e in events] == [("RequestRefused", "request-id-conflict")]
    assert rq.reply(question, "ask", other).status == "refused"
    assert rq.reply(question, "ask", other).code == "request-id-conflict"
    assert received(book, question, "ask", other)[0] == []  # refused again, recorded once
    # another kind under the same id is other content too
    events, _ = received(book, question, "progress", {"summary": "half way"})
    assert [e.code for e in events] == ["request-id-conflict"]
    assert rq.reply(question, "ask", ASK).status == "waiting"  # the first is untouched


def test_a_flood_of_conflicting_contents_on_one_id_records_a_bounded_number_of_refusals():
    book = Book()
    _, question = received(book, None, "ask", ASK)
    recorded = 0
    for n in range(200):  # an agent that reuses one id with ever new content
        other = {**ASK, "question": f"Which cache, number {n}?"}
        events, question = received(book, question, "ask", other)
        recorded += len(events)
        assert rq.reply(question, "ask", other).code == "request-id-conflict"  # refused every time
    assert recorded == rq.MAX_REFUSALS_RECORDED == len(question.refused)
    assert rq.reply(question, "ask", ASK).status == "waiting"


def test_a_fenced_generations_request_is_refused_and_recorded():
    book = Book()
    events, request = received(book, None, "ask", ASK, current=3)
    assert [(type(e).name, e.code) for e in events] == [("RequestRefused", "stale-generation")]
    assert rq.reply(request, "ask", ASK).code == "stale-generation"
    assert received(book, request, "ask", ASK, current=3)[0] == []


def test_a_question_asked_before_its_generation_was_fenced_is_refused_after():
    book = Book()
    _, question = received(book, None, "ask", ASK)
    events, question = received(book, question, "ask", ASK, current=3)
    assert [e.code for e in events] == ["stale-generation"]
    assert rq.reply(question, "ask", ASK).code == "stale-generation"


def test_a_closed_run_takes_no_request():
    book = Book()
    run = book.active_run()
    run = book.apply(run_aggregate.apply, run, run_aggregate.abort(run, "enough", T0))
    with pytest.raises(RunClosed):
        received(book, None, "ask", ASK, run=run)


@pytest.mark.parametrize("kind, raw, wrong", [
    ("ask", {"question": ""}, "question"),
    ("ask", {"question": "x" * 4001}, "question"),
    ("ask", {"question": "q", "reason": "curious"}, "reason"),
    ("ask", {"question": "q", "choices": ["a"] * 21}, "choices"),
    ("ask", {"question": "q", "choices": [3]}, "choices"),
    ("ask", {"question": "q", "extra": 1}, "extra"),
    ("progress", {"summary": "s", "cost_micro_usd": -1}, "cost_micro_usd"),
    ("progress", {"summary": "s", "input_tokens": 2 ** 60}, "input_tokens"),
    ("progress", {"summary": "s", "output_tokens": True}, "output_tokens"),
    ("propose", {"title": "t", "prompt": "p", "depends_on": ["../x"]}, "depends_on"),
    ("finish", {"summary": "a\x00b"}, "summary"),
    ("sing", {}, "one of"),
])
def test_a_request_that_is_not_well_formed_is_refused_as_bad_input(kind, raw, wrong):
    with pytest.raises(BadInput, match=wrong) as refused:
        received(Book(), None, kind, raw)
    assert refused.value.code == "bad-request"


def test_progress_proposals_and_finishes_are_recorded():
    book = Book()
    (progress,), state = received(book, None, "progress", {"summary": "tests pass", "cost_micro_usd": 1500})
    assert (progress.summary, progress.cost_micro_usd, progress.input_tokens) == ("tests pass", 1500, None)
    assert rq.reply(state, "progress", {"summary": "tests pass", "cost_micro_usd": 1500}).status == "recorded"
    planned = book.apply(run_aggregate.apply, book.active_run(),
                         run_aggregate.plan_run(book.active_run(), [("r1.t1", [])], "a", 1, 1, T0))
    for proposals, decision in (("queue", "queued"), ("refuse", "refused"), ("accept", "accepted")):
        raw = {"title": "docs", "prompt": "Write the docs.", "depends_on": ["t1"]}
        (proposed, *added), state = received(book, None, "propose", raw, policy=rq.InboxPolicy(proposals=proposals),
                                             request_id=f"p-{proposals}", run=planned)
        assert proposed.decision == decision and rq.reply(state, "propose", raw).decision == decision
        assert [type(e).name for e in added] == (["RunTaskAdded", "TaskPlanned"] if decision == "accepted" else [])
    (finished,), _ = received(book, None, "finish", {"summary": "done"}, request_id="f")
    assert type(finished).name == "WorkFinished"


def test_a_deadline_comes_from_the_runs_policy_never_from_the_agent():
    book = Book()
    policy = rq.InboxPolicy(deadline_ms=60_000, on_deadline="default", default_answer="Use your judgement.")
    (asked,), question = received(book, None, "ask", ASK, policy=policy)
    assert (asked.deadline_at, asked.on_deadline, asked.default_answer) == (at(60_000), "default", "sqlite")
    (plain,), _ = received(book, None, "ask", {"question": "Go on?"}, policy=policy, request_id="q2")
    assert plain.default_answer == "Use your judgement."
    (none,), _ = received(book, None, "ask", {"question": "Go on?"}, request_id="q3")
    assert (none.deadline_at, none.on_deadline) == (None, "wait")


def answered(book, question, run, **kw):
    kw = {"text": None, "choice": None, "by": "ada", "trusted": True, "via": "cli", "now": at(1000), **kw}
    events = rq.answer(question, run, **kw)
    return events, book.apply(rq.apply, question, events) if events else question


def test_a_question_is_answered_once_by_a_trusted_person():
    book = Book()
    run = book.active_run()
    _, question = received(book, None, "ask", ASK, run=run)
    (event,), question = answered(book, question, run, choice=2)
    assert (event.answer, event.choice, event.answered_by, event.via) == ("postgres", 2, "ada", "cli")
    assert rq.reply(question, "ask", ASK).document() == {"status": "answered", "request": question.key,
                                                         "answer": "postgres", "choice": 2, "answered_by": "ada"}
    assert answered(book, question, run, choice=2)[0] == []  # said again: the same answer, nothing new
    with pytest.raises(Refused) as refused:
        answered(book, question, run, text="sqlite")
    assert refused.value.code == "already-answered"


def test_an_untrusted_answer_is_recorded_as_refused_and_leaves_the_question_open():
    book = Book()
    run = book.active_run()
    _, question = received(book, None, "ask", ASK, run=run)
    (refusal,), question = answered(book, question, run, text="sqlite", by="mallory", trusted=False)
    assert (type(refusal).name, refusal.code, refusal.answered_by) == ("AnswerRefused", "untrusted-answerer",
                                                                       "mallory")
    assert question.status == "open" and rq.reply(question, "ask", ASK).status == "waiting"


@pytest.mark.parametrize("kw, code", [({"choice": 3}, "no-such-choice"), ({"choice": 0}, "no-such-choice"),
                                      ({"text": "sqlite", "choice": 2}, "answer-and-choice"),
                                      ({"text": ""}, "bad-answer"), ({"text": "x" * 4001}, "bad-answer")])
def test_a_wrong_answer_is_bad_input(kw, code):
    book = Book()
    run = book.active_run()
    _, question = received(book, None, "ask", ASK, run=run)
    with pytest.raises(BadInput) as refused:
        answered(book, question, run, **kw)
    assert refused.value.code == code


def test_only_a_question_is_answered():
    book = Book()
    run = book.active_run()
    with pytest.raises(NotFound):
        answered(book, None, run, text="x")
    _, progress = received(book, None, "progress", {"summary": "s"}, run=run)
    with pytest.raises(Refused, match="not a question"):
        answered(book, progress, run, text="x")


def test_a_deadline_answers_with_its_default_or_expires_the_question():
    book = Book()
    run = book.active_run()
    default = rq.InboxPolicy(deadline_ms=60_000, on_deadline="default", default_answer="Decide yourself.")
    _, question = received(book, None, "ask", ASK, policy=default, run=run)
    assert rq.expire(question, run, at(59_999)) == []
    (event,) = rq.expire(question, run, at(60_000))
    assert (type(event).name, event.answer, event.choice, event.answered_by, event.via) == (
        "QuestionAnswered", "sqlite", 1, "docket", "deadline")
    failing = rq.InboxPolicy(deadline_ms=1_000, on_deadline="fail")
    _, question = received(book, None, "ask", ASK, policy=failing, run=run, request_id="q9")
    (event,), question = (lambda e: (e, book.apply(rq.apply, question, e)))(rq.expire(question, run, at(5_000)))
    assert type(event).name == "QuestionExpired"
    assert rq.reply(question, "ask", ASK).status == "expired"
    assert rq.expire(question, run, at(9_000)) == []
    with pytest.raises(Refused) as refused:
        answered(book, question, run, text="late")
    assert refused.value.code == "question-expired"
    waiting = rq.InboxPolicy(deadline_ms=1_000, on_deadline="wait")
    _, question = received(book, None, "ask", ASK, policy=waiting, run=run, request_id="q10")
    assert rq.expire(question, run, at(10 ** 9)) == []


def test_an_answer_is_delivered_once_and_only_once_answered():
    book = Book()
    run = book.active_run()
    _, question = received(book, None, "ask", ASK, run=run)
    assert rq.deliver(question, at(1)) == []  # nothing to deliver yet
    _, question = answered(book, question, run, choice=1)
    (event,) = rq.deliver(question, at(2))
    assert (type(event).name, event.request_key, event.generation) == ("AnswerDelivered", question.key, 2)
    question = book.apply(rq.apply, question, [event])
    assert question.delivered and rq.deliver(question, at(3)) == []


def test_a_prompt_after_answers_tells_them_and_whether_the_work_goes_on():
    from docket.domain.task import answered_prompt

    answers = [("Which db?", "sqlite", "ada"), ("Go on?", "yes", "docket")]
    assert answered_prompt("Do it.", [], goes_on=True) == "Do it."
    goes_on = answered_prompt("Do it.", answers, goes_on=True)
    assert goes_on.startswith("Do it.\n\n---\nYou asked questions and stopped before they were answered.")
    assert "Q: Which db?\nA (ada): sqlite" in goes_on and "Q: Go on?\nA (docket): yes" in goes_on
    retry = answered_prompt("Do it.", answers, goes_on=False)
    assert "Questions an earlier attempt asked, and their answers:" in retry and "stopped before" not in retry
    many = answered_prompt("Do it.", [(f"q{i}", f"a{i}", "ada") for i in range(30)], goes_on=False)
    assert "q29" in many and "Q: q19\n" not in many  # the last ten
