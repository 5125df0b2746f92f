import pytest

from docket.domain import events as ev
from docket.domain import run
from docket.domain.effects import is_resolved, record_unknown
from docket.domain.kernel.errors import BadInput, Refused

from .builders import SUPERVISOR, COMMIT, T0, Book, at


def test_open_records_the_run_and_the_base_pin_intent():
    opened, intent = run.open_run("r1", "i1", "goal", "main", 60_000, "/repo/.git", T0)
    assert isinstance(opened, ev.RunOpened) and (opened.stream, opened.version) == ("run:r1", 1)
    assert isinstance(intent, ev.RunBasePinRequested) and intent.version == 2 and intent.intent_id == "i1"
    state = Book().apply(run.apply, None, [opened, intent])
    assert state.status == "opening" and state.pending_intents == {"i1"}


def test_empty_goal_is_bad_input():
    with pytest.raises(BadInput) as e:
        run.open_run("r1", "i1", "  ", "main", None, "/r", T0)
    assert e.value.code == "empty-goal"


def test_base_pin_activates_and_resolves_the_intent():
    book = Book()
    opened = run.open_run("r1", "i1", "goal", "main", None, "/repo/.git", T0)
    r = book.apply(run.apply, None, opened)
    pinned = run.record_base_pin(r, "i1", T0, commit=COMMIT)
    r = book.apply(run.apply, r, pinned)
    assert r.status == "active" and r.base_commit == COMMIT and not r.pending_intents
    assert is_resolved([(2, opened[0]), (3, opened[1]), (4, pinned)], "i1")  # the effector records nothing more


def test_failed_base_pin_fails_the_run():
    book = Book()
    r = book.apply(run.apply, None, run.open_run("r1", "i1", "g", "nope", None, "/r", T0))
    r = book.apply(run.apply, r, run.record_base_pin(r, "i1", at(5), failure=("unknown-branch", "no branch")))
    assert r.status == "failed" and r.failure_code == "unknown-branch"
    assert r.used_ms(at(1000)) == 0  # never active, never supervised: nothing billed
    with pytest.raises(Refused):
        run.abort(r, "x", at(6))


def test_unknown_outcome_keeps_the_intent_pending():
    book = Book()
    r = book.apply(run.apply, None, run.open_run("r1", "i1", "g", "main", None, "/r", T0))
    unknown = record_unknown("run:r1", r.version, "i1", "disk gone", None, T0)
    r = book.apply(run.apply, r, unknown)
    assert r.status == "opening" and r.pending_intents == {"i1"}


def test_abort_cancels_the_runs_pending_intents_with_a_recorded_outcome():
    book = Book()
    r = book.apply(run.apply, None, run.open_run("r1", "i1", "g", "main", None, "/r", T0))
    events = run.abort(r, "wrong goal", at(5))
    assert [e.type_name() for e in events] == ["RunAborted.v1", "IntentCancelled.v1"]
    assert events[1].intent_id == "i1" and [e.version for e in events] == [3, 4]
    r = book.apply(run.apply, r, events)
    assert r.status == "aborted" and r.pending_intents == frozenset()
    assert is_resolved(list(enumerate(events)), "i1")  # so the effector records no outcome after it


def test_abort_of_a_run_with_nothing_pending_records_only_the_abort():
    book = Book()
    r = book.active_run()
    assert [e.type_name() for e in run.abort(r, "stop", at(1))] == ["RunAborted.v1"]


def test_budget_is_the_sum_of_active_intervals():
    book = Book()
    r = book.active_run(budget_ms=10_000, supervised=True)
    r = book.apply(run.apply, r, run.pause(r, None, at(3_000)))
    assert r.used_ms(at(50_000)) == 3_000  # paused time is not billed
    r = book.apply(run.apply, r, run.resume(r, at(60_000)))
    assert r.used_ms(at(62_000)) == 5_000
    assert r.remaining_ms(at(62_000)) == 5_000


def test_resume_is_refused_when_the_budget_is_spent():
    book = Book()
    r = book.active_run(budget_ms=1_000, supervised=True)
    r = book.apply(run.apply, r, run.pause(r, None, at(1_500)))
    with pytest.raises(Refused) as e:
        run.resume(r, at(2_000))
    assert e.value.code == "budget-exhausted"


@pytest.mark.parametrize("status_change, command, code", [
    ("none", lambda r: run.resume(r, T0), "run-not-paused"),
    ("pause", lambda r: run.pause(r, None, T0), "run-not-active"),
    ("abort", lambda r: run.complete(r, T0), "run-closed"),
    ("complete", lambda r: run.abort(r, "x", T0), "run-closed"),
    ("complete", lambda r: run.pause(r, None, T0), "run-not-active"),
])
def test_transitions_are_refused_from_the_wrong_status(status_change, command, code):
    book = Book()
    r = book.active_run()
    change = {"none": None, "pause": run.pause(r, None, T0), "abort": run.abort(r, "x", T0),
              "complete": run.complete(r, T0)}[status_change]
    if change is not None:
        r = book.apply(run.apply, r, change)
    with pytest.raises(Refused) as e:
        command(r)
    assert e.value.code == code


def test_complete_needs_a_pinned_base():
    book = Book()
    r = book.apply(run.apply, None, run.open_run("r1", "i1", "g", "main", None, "/r", T0))
    with pytest.raises(Refused) as e:
        run.complete(r, T0)
    assert e.value.code == "run-base-not-pinned"


def test_events_take_consecutive_stream_versions():
    book = Book()
    r = book.active_run()
    paused = run.pause(r, None, T0)
    assert paused.version == r.version + 1 == 4


def test_unsupervised_time_is_not_billed_and_a_gone_supervisor_stops_the_clock_at_its_last_sign_of_life():
    book = Book()
    r = book.active_run(budget_ms=60_000)
    assert r.used_ms(at(30_000)) == 0  # active, but no docket process supervises it
    r = book.apply(run.apply, r, run.supervised(r, "s1", SUPERVISOR, at(30_000)))
    r = book.apply(run.apply, r, run.supervised(r, "s2", SUPERVISOR, at(31_000)))
    r = book.apply(run.apply, r, run.unsupervised(r, "s2", at(35_000)))
    assert r.used_ms(at(40_000)) == 10_000  # s1 still supervises
    r = book.apply(run.apply, r, run.unsupervised(r, "s1", at(90_000), last_seen=at(42_000)))
    assert r.used_ms(at(100_000)) == 12_000 and r.active_since is None  # the crash's downtime is not billed
    assert run.unsupervised(r, "s1", at(95_000)) == []  # once


def test_a_run_waits_for_its_user_once_per_reason_until_it_is_supervised_again():
    book = Book()
    r = book.apply(run.apply, None, run.open_run("r1", "i1", "g", "main", None, "/r", T0))
    r = book.apply(run.apply, r, run.record_base_pin(r, "i1", T0, commit=COMMIT))
    (waiting,) = run.wait(r, "target-checked-out", "untracked a.txt is in the way", at(1))
    r = book.apply(run.apply, r, waiting)
    assert r.status == "active" and r.waiting == ("target-checked-out", "untracked a.txt is in the way")
    assert run.wait(r, "target-checked-out", "untracked a.txt is in the way", at(2)) == []  # said already
    r = book.apply(run.apply, r, run.wait(r, "awaiting-approval", "approve it", at(3)))
    assert r.waiting == ("awaiting-approval", "approve it")
    r = book.apply(run.apply, r, run.supervised(r, "s1", SUPERVISOR, at(4)))
    assert r.waiting is None  # a supervisor is at it again
    r = book.apply(run.apply, r, run.complete(r, at(5)))
    assert run.wait(r, "awaiting-approval", "approve it", at(6)) == []  # a closed run waits for nothing
