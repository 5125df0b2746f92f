"""A follow-up task a worker proposed, added to its run by its policy or by a person (domain.follow_ups)."""

from __future__ import annotations

import hashlib

import pytest

from docket.domain import follow_ups
from docket.domain import requests as rq
from docket.domain import run as run_aggregate
from docket.domain.kernel.errors import BadInput, Refused, RunClosed

from .builders import T0, Book

BINDING = rq.Binding(run_id="r1", task_id="r1.api", worker_id="r1.api", generation=1)
DOCS = {"title": "document the api", "prompt": "Write docs/api.md.", "depends_on": ["schema"]}


def planned(book: Book) -> run_aggregate.Run:
    run = book.active_run()
    return book.apply(run_aggregate.apply, run, run_aggregate.plan_run(
        run, [("r1.schema", []), ("r1.api", ["r1.schema"])], "agent", 2, 2, T0))


def proposed(book, run, policy, raw=DOCS, request_id="p1"):
    events = rq.receive(None, 1, run, BINDING, request_id, "propose", raw, rq.InboxPolicy(proposals=policy), T0)
    return events, book.apply(rq.apply, None, events[:1])


def test_an_accepting_policy_adds_the_task_after_the_runs_own_depending_on_its_proposer_and_those_named():
    book = Book()
    run = planned(book)
    events, proposal = proposed(book, run, "accept")
    made, added, task = events
    assert (made.decision, made.message) == ("accepted", None)
    assert added.task.task_id == "r1.follow-1" and added.task.depends_on == ["r1.api", "r1.schema"]
    assert added.request_key == proposal.key and added.stream == run_aggregate.stream_of("r1")
    assert (task.task_id, task.title, task.prompt_chars) == ("r1.follow-1", DOCS["title"], len(DOCS["prompt"]))
    assert task.prompt_sha256 == hashlib.sha256(DOCS["prompt"].encode()).hexdigest()
    run = book.apply(run_aggregate.apply, run, added)
    assert run.plan.task_ids == ("r1.schema", "r1.api", "r1.follow-1") and run.plan.added == 1
    assert run.plan.depends_on("r1.follow-1") == ("r1.api", "r1.schema")
    # a resume with the run's own tasks still finds the plan it recorded
    assert run_aggregate.plan_run(run, [("r1.schema", []), ("r1.api", ["r1.schema"])], "agent", 2, 2, T0) == []
    (second, added2, _), _ = proposed(book, run, "accept", {**DOCS, "title": "more docs"}, request_id="p2")
    assert added2.task.task_id == "r1.follow-2"


def test_a_proposal_that_cannot_be_added_is_refused_saying_why():
    book = Book()
    run = planned(book)
    (made,), _ = proposed(book, run, "accept", {**DOCS, "depends_on": ["nowhere"]})
    assert made.decision == "refused" and "'nowhere', which is no task of run r1" in made.message
    (made,), _ = proposed(book, run, "queue", {**DOCS, "depends_on": ["nowhere"]})
    assert made.decision == "refused"
    (made,), _ = proposed(book, book.active_run(run_id="r1"), "accept")  # no plan: not docket go's
    assert made.decision == "refused" and "no plan" in made.message
    full = run
    for n in range(follow_ups.MAX_ADDED):
        (_, added, _), _ = proposed(book, full, "accept", {**DOCS, "title": f"docs {n}"}, request_id=f"p{n}")
        full = book.apply(run_aggregate.apply, full, added)
    (made,), _ = proposed(book, full, "accept", {**DOCS, "title": "one more"}, request_id="one-more")
    assert made.decision == "refused" and f"{follow_ups.MAX_ADDED} follow-up task(s)" in made.message


def test_a_queued_proposal_is_decided_once_by_someone_trusted():
    book = Book()
    run = planned(book)
    (made,), proposal = proposed(book, run, "queue")
    assert made.decision == "queued" and rq.reply(proposal, "propose", DOCS).decision == "queued"
    (refused,) = rq.decide_follow_up(proposal, run, accept=True, by="mallory", trusted=False, via="cli", now=T0)
    assert (type(refused).name, refused.code) == ("AnswerRefused", "untrusted-answerer")
    proposal = book.apply(rq.apply, proposal, [refused])
    assert proposal.decision == "queued"
    decided, added, task = rq.decide_follow_up(proposal, run, accept=True, by="alice", trusted=True, via="cli", now=T0)
    assert (decided.decision, decided.decided_by, decided.task_id) == ("accepted", "alice", "r1.follow-1")
    assert added.task.task_id == task.task_id == "r1.follow-1"
    proposal = book.apply(rq.apply, proposal, [decided])
    assert (proposal.decision, proposal.added_task) == ("accepted", "r1.follow-1")
    assert rq.reply(proposal, "propose", DOCS).decision == "accepted"  # what the agent is told when it asks again
    assert rq.decide_follow_up(proposal, run, accept=True, by="alice", trusted=True, via="cli", now=T0) == []
    with pytest.raises(Refused) as again:
        rq.decide_follow_up(proposal, run, accept=False, by="alice", trusted=True, via="cli", now=T0)
    assert again.value.code == "already-decided"


def test_a_refused_proposal_adds_nothing_and_a_closed_run_takes_no_decision():
    book = Book()
    run = planned(book)
    _, proposal = proposed(book, run, "queue")
    (decided,) = rq.decide_follow_up(proposal, run, accept=False, by="alice", trusted=True, via="cli", now=T0)
    assert (decided.decision, decided.task_id) == ("refused", None)
    closed = book.apply(run_aggregate.apply, run, run_aggregate.complete(run, T0))
    with pytest.raises(RunClosed):
        rq.decide_follow_up(proposal, closed, accept=True, by="alice", trusted=True, via="cli", now=T0)
    with pytest.raises(Refused) as policy:
        rq.decide_follow_up(book.apply(rq.apply, None, proposed(book, run, "accept", request_id="p9")[0][:1]), run,
                          accept=False, by="alice", trusted=True, via="cli", now=T0)
    assert policy.value.code == "already-decided"  # the policy decided it


@pytest.mark.parametrize(("text", "choice", "accepts"), [(None, 1, True), (None, 2, False), ("accept", None, True),
                                                        (" Refuse ", None, False), ("accept", 1, True)])
def test_a_person_accepts_or_refuses_by_choice_or_by_word(text, choice, accepts):
    assert follow_ups.choice_of(text, choice) is accepts


@pytest.mark.parametrize(("text", "choice"), [(None, 3), (None, None), ("maybe", None), ("refuse", 1)])
def test_anything_else_is_bad_input(text, choice):
    with pytest.raises(BadInput):
        follow_ups.choice_of(text, choice)


def test_the_same_follow_up_proposed_again_by_a_later_generation_is_the_task_added_the_first_time():
    """A generation retried after a failed check redoes its work, proposal included: no second task."""
    book = Book()
    run = planned(book)
    (_, added, _), _ = proposed(book, run, "accept")
    run = book.apply(run_aggregate.apply, run, added)
    later = rq.Binding(run_id="r1", task_id="r1.api", worker_id="r1.api", generation=2)
    events = rq.receive(None, 2, run, later, "p1", "propose", DOCS, rq.InboxPolicy(proposals="accept"), T0)
    (made,) = events
    assert made.decision == "accepted" and "before: task r1.follow-1" in made.message
    # another task proposing the same is another follow-up; so is other content from the same task
    other = rq.Binding(run_id="r1", task_id="r1.schema", worker_id="r1.schema", generation=1)
    (_, added2, _) = rq.receive(None, 1, run, other, "p1", "propose", {**DOCS, "depends_on": []},
                                rq.InboxPolicy(proposals="accept"), T0)
    assert added2.task.task_id == "r1.follow-2"
    # queued, then accepted by a person: the same task too
    _, queued = proposed(book, run, "queue", request_id="p7")
    decided, *more = rq.decide_follow_up(queued, run, accept=True, by="alice", trusted=True, via="cli", now=T0)
    assert (decided.task_id, more) == ("r1.follow-1", [])
