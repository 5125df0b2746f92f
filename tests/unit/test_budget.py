"""One rule for a run's budget: the Run aggregate and the runs read model agree.

Hypothesis builds a run's lifecycle events in any order (not only the orders the
decisions allow), folds them into the aggregate and projects them into the runs
table, and both must report the same used and remaining budget at any later time.
"""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from docket.domain import budget, run
from docket.domain import events as ev
from docket.domain.kernel.canonical import canonical_json
from docket.domain.kernel.values import MAX_DURATION_MS, MAX_SAFE_INT, from_ms, to_ms
from docket.projections import runs
from docket.projections.views import Views

from .builders import COMMIT, T0

STREAM = run.stream_of("r1")
LIFECYCLE = {
    "pause": lambda s, v, at: ev.RunPaused(stream=s, version=v, recorded_at=at, run_id="r1", reason=None),
    "resume": lambda s, v, at: ev.RunResumed(stream=s, version=v, recorded_at=at, run_id="r1"),
    "abort": lambda s, v, at: ev.RunAborted(stream=s, version=v, recorded_at=at, run_id="r1", reason="stop"),
    "complete": lambda s, v, at: ev.RunCompleted(stream=s, version=v, recorded_at=at, run_id="r1"),
    "pinned": lambda s, v, at: ev.RunBasePinned(stream=s, version=v, recorded_at=at, intent_id="i1", run_id="r1",
                                                commit=COMMIT, result="observed"),
    "pin-failed": lambda s, v, at: ev.RunBasePinFailed(stream=s, version=v, recorded_at=at, intent_id="i1",
                                                       run_id="r1", code="unknown-branch", message="no branch"),
}
SUPERVISOR = ev.ProcessIdentity(host="h", boot_id="b", pid=7, pgid=7, start_time="1")
LIFECYCLE.update({
    f"supervised-{n}": (lambda n: lambda s, v, at: ev.RunSupervised(
        stream=s, version=v, recorded_at=at, run_id="r1", supervision_id=f"s{n}", supervisor=SUPERVISOR))(n)
    for n in (1, 2)})
LIFECYCLE.update({
    f"unsupervised-{n}": (lambda n: lambda s, v, at: ev.RunUnsupervised(
        stream=s, version=v, recorded_at=at, run_id="r1", supervision_id=f"s{n}", ended_at=at, cause="finished"))(n)
    for n in (1, 2)})
LIFECYCLE["supervisor-gone"] = lambda s, v, at: ev.RunUnsupervised(  # last seen a minute before it was found gone
    stream=s, version=v, recorded_at=at, run_id="r1", supervision_id="s1",
    ended_at=from_ms(max(0, to_ms(at) - 60_000)), cause="supervisor-gone")
gap = st.integers(0, 10 * 86_400_000)


def _project(events: list[ev.Event]) -> sqlite3.Connection:
    views = Views(sqlite3.connect(":memory:", isolation_level=None))
    views.ensure_schema()
    rows = [(position, e.stream, e.version, e.type_name(),
             canonical_json({"payload": e.payload(), "recorded_at": e.recorded_at}))
            for position, e in enumerate(events, start=1)]
    views.apply(rows, lambda position: "0" * 64)
    return views.conn


@settings(max_examples=200, deadline=None)
@given(budget_ms=st.none() | st.integers(1, MAX_DURATION_MS),
       steps=st.lists(st.tuples(st.sampled_from(sorted(LIFECYCLE)), gap), max_size=16),
       later=st.lists(gap, min_size=1, max_size=3))
def test_the_aggregate_and_the_read_model_agree_on_the_budget(budget_ms, steps, later):
    events: list[ev.Event] = [ev.RunOpened(stream=STREAM, version=1, recorded_at=T0, run_id="r1", goal="g",
                                           target_branch="main", budget_ms=budget_ms)]
    ms = to_ms(T0)
    for kind, step in steps:
        ms += step
        events.append(LIFECYCLE[kind](STREAM, len(events) + 1, from_ms(ms)))
    state = None
    for position, event in enumerate(events, start=1):
        state = run.apply(state, event, position)
    conn = _project(events)
    row = runs.get_run(conn, "r1")
    for step in later:
        ms += step
        now = from_ms(ms)
        shown = runs.with_budget(row, now)
        assert (shown["used_ms"], shown["remaining_ms"]) == (state.used_ms(now), state.remaining_ms(now))
        assert 0 <= shown["used_ms"] <= ms - to_ms(T0)  # never more than the run's lifetime


def test_used_time_is_clamped():
    assert budget.used_ms(5, None, T0) == 5
    assert budget.used_ms(5, from_ms(to_ms(T0) + 1_000), T0) == 5  # now before the interval opened counts nothing
    assert budget.used_ms(MAX_SAFE_INT, T0, from_ms(to_ms(T0) + 1_000)) == MAX_SAFE_INT
    assert budget.remaining_ms(None, 10) is None
    assert budget.remaining_ms(1_000, 1_500) == 0


def test_only_supervised_active_time_is_billed():
    """Opened at T0, pinned at +1m, supervised +2m..+5m (3m), paused +4m..+6m, a crashed supervisor last seen at +8m
    but found gone at +20m: billed 2m + 2m = 4m."""
    def t(minutes: int) -> str:
        return from_ms(to_ms(T0) + minutes * 60_000)

    s = ev.ProcessIdentity(host="h", boot_id="b", pid=7, pgid=7, start_time="1")
    events = [ev.RunOpened(stream=STREAM, version=1, recorded_at=T0, run_id="r1", goal="g", target_branch="main",
                           budget_ms=3_600_000),
              LIFECYCLE["pinned"](STREAM, 2, t(1)),
              ev.RunSupervised(stream=STREAM, version=3, recorded_at=t(2), run_id="r1", supervision_id="a",
                               supervisor=s),
              LIFECYCLE["pause"](STREAM, 4, t(4)),
              LIFECYCLE["resume"](STREAM, 5, t(6)),
              ev.RunUnsupervised(stream=STREAM, version=6, recorded_at=t(20), run_id="r1", supervision_id="a",
                                 ended_at=t(8), cause="supervisor-gone")]
    state = None
    for position, event in enumerate(events, start=1):
        state = run.apply(state, event, position)
        if position == 2:
            assert state.used_ms(t(2)) == 0  # active, but nobody supervises: not billed
    assert state.used_ms(t(30)) == 4 * 60_000
    assert runs.with_budget(runs.get_run(_project(events), "r1"), t(30))["used_ms"] == 4 * 60_000
