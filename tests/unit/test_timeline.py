"""Where a run's time went (domain.timeline): spans paired from their events, open ones ending now."""

from __future__ import annotations

from docket.domain.reports.timeline import timeline
from docket.domain.kernel.values import from_ms, to_ms

T0 = "2026-12-03T10:00:00.000Z"


def at(seconds: float) -> str:
    return from_ms(to_ms(T0) + int(seconds * 1000))


def test_each_generation_check_step_and_wait_is_a_span_in_its_tasks_lane():
    events = [
        ("WorkerLaunched", at(1), {"worker_id": "r.a", "generation": 1}),
        ("QuestionAsked", at(2), {"task_id": "r.a", "request_key": "req-a"}),
        ("QuestionAnswered", at(5), {"request_key": "req-a"}),
        ("WorkerExited", at(6), {"worker_id": "r.a", "generation": 1, "cause": "exited"}),
        ("CheckRequested", at(6), {"task_id": "r.a", "check_id": "c1", "check": "tests"}),
        ("CheckFailed", at(8), {"check_id": "c1"}),
        ("WorkerLaunched", at(9), {"worker_id": "r.a", "generation": 2}),
        ("WorkerLaunched", at(1), {"worker_id": "r.b", "generation": 1}),
        ("IntegrationStepRequested", at(10), {"task_id": "r.a", "step": 1}),
        ("IntegrationStepVerified", at(12), {"task_id": "r.a", "step": 1}),
        ("WorkerExited", at(13), {"worker_id": "r.elsewhere", "generation": 1}),  # no lane, no begin: ignored
    ]
    t = timeline(events, ["r.a", "r.b"], T0, at(20))
    assert (t.start_ms, t.end_ms) == (to_ms(T0), to_ms(at(20)))
    a, b = t.lanes
    assert [(s.kind, s.label, s.outcome, s.end_ms - s.start_ms, s.open) for s in a.spans] == [
        ("agent", "generation 1", "exited", 5000, False),
        ("wait", "question", "answered", 3000, False),
        ("check", "check tests", "failed", 2000, False),
        ("agent", "generation 2", "running", 11000, True),  # still running: it ends now
        ("merge", "step 1", "verified", 2000, False),
    ]
    assert [(s.kind, s.open) for s in b.spans] == [("agent", True)]


def test_a_run_with_no_events_yet_has_empty_lanes_and_a_span_of_time():
    t = timeline([], ["r.a"], T0, T0)
    assert t.end_ms > t.start_ms and t.lanes[0].spans == ()


def test_a_begin_recorded_twice_after_a_crash_is_one_span():
    events = [("CheckRequested", at(1), {"task_id": "r.a", "check_id": "c1", "check": "x"}),
              ("CheckRequested", at(2), {"task_id": "r.a", "check_id": "c1", "check": "x"}),
              ("CheckPassed", at(3), {"check_id": "c1"})]
    (lane,) = timeline(events, ["r.a"], T0, at(4)).lanes
    assert [(s.start_ms - to_ms(T0), s.outcome) for s in lane.spans] == [(1000, "passed")]


def test_the_axis_of_a_closed_run_ends_at_its_close_whatever_its_streams_record_later():
    """A `docket gc` days after the run releases its candidates in the run's streams: that is not the run's time, so
    the axis still ends at the close and the run's bars keep their width (issue 35, item 10)."""
    days = 3 * 86400
    events = [
        ("WorkerLaunched", at(1), {"worker_id": "r.a", "generation": 1}),
        ("WorkerExited", at(6), {"worker_id": "r.a", "generation": 1, "cause": "exited"}),
        ("CheckRequested", at(7), {"task_id": "r.a", "check_id": "c1", "check": "tests"}),
        ("CheckPassed", at(9), {"check_id": "c1"}),
        ("WorkerLaunched", at(8), {"worker_id": "r.b", "generation": 1}),  # never seen to exit before the close
        ("CandidateReleaseRequested", at(days), {"binding_id": "b1"}),  # gc, three days on
        ("CandidateReleased", at(days), {"binding_id": "b1"}),
        ("WorktreeRemoved", at(days + 1), {"task_id": "r.a"}),
        ("WorkerExited", at(days + 2), {"worker_id": "r.b", "generation": 1, "cause": "lost"}),  # observed late
    ]
    t = timeline(events, ["r.a", "r.b"], T0, at(days + 5), closed_at=at(10))
    assert (t.start_ms, t.end_ms) == (to_ms(T0), to_ms(at(10)))
    a, b = t.lanes
    assert [(s.kind, s.start_ms - to_ms(T0), s.end_ms - to_ms(T0)) for s in a.spans] == [
        ("agent", 1000, 6000), ("check", 7000, 9000)]
    assert [(s.start_ms - to_ms(T0), s.end_ms - to_ms(T0), s.outcome) for s in b.spans] == [(8000, 10000, "lost")]
    # while a run is open its axis ends now (or at a later event, a clock behind the ledger's)
    assert timeline(events[:4], ["r.a"], T0, at(20)).end_ms == to_ms(at(20))
    assert timeline(events[:4], ["r.a"], T0, at(5)).end_ms == to_ms(at(9))
