"""Every number and time docket accepts fits what every store and projection can hold.

Issue 5 item 2: a budget of 2**63 ms was recorded and every later projection
failed. Inputs are bounded before they reach an event, and the events
themselves refuse what no projection could hold.
"""

from __future__ import annotations

import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from docket.domain import events as ev
from docket.domain import lease
from docket.domain.kernel.errors import BadInput
from docket.domain.kernel.values import (
    LATEST_TIME,
    MAX_DURATION_MS,
    MAX_SAFE_INT,
    add_ms,
    from_ms,
    parse_duration,
    parse_position,
    parse_time,
    to_ms,
)

from .builders import Book


def test_the_bounds_are_json_safe():
    assert MAX_SAFE_INT == 2**53 - 1
    assert 0 < MAX_DURATION_MS < MAX_SAFE_INT
    assert to_ms(LATEST_TIME) < MAX_SAFE_INT


@pytest.mark.parametrize("text, ms", [("1h30m", 5_400_000), ("2d3h4m5s6ms", 183_845_006), ("0h5m", 300_000),
                                      ("36500d", MAX_DURATION_MS)])
def test_durations_in_descending_units(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize("bad", [
    "", " ", "\t", "5m5m", "30m1h", "1s1m", "5ms5s", "1h1h", "5d5d",
    "36501d", "9223372036854775808ms", "99999999h", "9" * 5000 + "ms", "١٢m",  # Arabic-Indic digits
])
def test_strict_durations_are_refused(bad):
    with pytest.raises(BadInput) as e:
        parse_duration(bad)
    assert e.value.code == "bad-duration"


@pytest.mark.parametrize("bad", ["0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59.999Z",
                                 "9999-12-31T23:59:59-01:00", "", "9" * 5000])
def test_times_outside_what_docket_records_are_refused(bad):
    with pytest.raises(BadInput) as e:
        parse_time(bad)
    assert e.value.code == "bad-time"


def test_the_edges_of_recordable_time_round_trip():
    assert parse_time("1970-01-01T00:00:00Z") == from_ms(0) == "1970-01-01T00:00:00.000Z"
    assert parse_time("9999-12-31T23:59:59.999Z") == LATEST_TIME == from_ms(to_ms(LATEST_TIME))


@pytest.mark.parametrize("ms", [-1, to_ms(LATEST_TIME) + 1, 2**63, -(2**63)])
def test_from_ms_refuses_without_overflow(ms):
    with pytest.raises(BadInput) as e:
        from_ms(ms)
    assert e.value.code == "time-out-of-range"


def test_add_ms_stays_in_range():
    assert add_ms("2026-01-01T00:00:00.000Z", 60_000) == "2026-01-01T00:01:00.000Z"
    with pytest.raises(BadInput) as e:
        add_ms("9999-12-31T23:59:00.000Z", 600_000)
    assert e.value.code == "time-out-of-range"


@pytest.mark.parametrize("text, position", [("1", 1), (str(MAX_SAFE_INT), MAX_SAFE_INT)])
def test_positions(text, position):
    assert parse_position(text) == position


@pytest.mark.parametrize("bad", ["", "0", "-1", "+1", " 1", "1.0", "²", "١", str(MAX_SAFE_INT + 1), "9" * 5000])
def test_bad_positions(bad):
    with pytest.raises(BadInput) as e:
        parse_position(bad)
    assert e.value.code == "bad-position"


def test_a_grant_that_would_expire_past_the_last_time_is_refused():
    book = Book()
    now = "9999-12-31T23:59:00.000Z"
    r = book.active_run(now=now)
    w = book.worker(r, now=now)
    with pytest.raises(BadInput) as e:
        lease.grant(None, None, w, 1, r, "wt/a", 600_000, now)
    assert e.value.code == "time-out-of-range"
    held = book.lease(None, None, w, r, ttl=30_000, now=now)
    with pytest.raises(BadInput):
        lease.renew(held, w, "wt/a", held.token, 600_000, now)


def _int_bounds(annotation: object, metadata: list[object]) -> list[tuple[object, object]]:
    """(ge/gt, le/lt) of each int inside a field's annotation (through Optional and Annotated)."""
    found = []
    flat = [inner for m in metadata for inner in [m, *getattr(m, "metadata", [])]]  # a Field() holds its constraints
    if annotation is int:
        lower = [getattr(m, bound) for m in flat for bound in ("ge", "gt") if getattr(m, bound, None) is not None]
        upper = [getattr(m, bound) for m in flat for bound in ("le", "lt") if getattr(m, bound, None) is not None]
        found.append((lower[0] if lower else None, upper[0] if upper else None))
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        found += _int_bounds(inner, [*metadata, *extra])
    elif typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for arm in typing.get_args(annotation):
            found += _int_bounds(arm, metadata)
    return found


@pytest.mark.parametrize("cls", ev.EVENT_TYPES.values(), ids=lambda c: c.type_name())
def test_every_integer_field_is_bounded(cls):
    for name, field in cls.model_fields.items():
        for lower, upper in _int_bounds(field.annotation, list(field.metadata)):
            assert lower is not None and lower >= 0, f"{cls.type_name()}.{name} has no lower bound"
            assert upper is not None and upper <= MAX_SAFE_INT, f"{cls.type_name()}.{name} is not bounded by 2**53-1"


def test_events_refuse_numbers_no_projection_could_hold():
    with pytest.raises(ValidationError):
        ev.RunOpened(stream="run:r", version=1, recorded_at="2026-01-01T00:00:00.000Z", run_id="r", goal="g",
                     target_branch="main", budget_ms=2**63)
    with pytest.raises(ValidationError):
        ev.RunResumed(stream="run:r", version=2**53, recorded_at="2026-01-01T00:00:00.000Z", run_id="r")


@pytest.mark.parametrize("bad", ["2026-99-01T00:00:00.000Z", "2026-02-30T00:00:00.000Z",
                                 "2026-01-01T24:00:00.000Z", "0001-01-01T00:00:00.000Z"])
def test_timestamps_are_real_times_in_range(bad):
    with pytest.raises(ValidationError):
        ev.RunResumed(stream="run:r", version=2, recorded_at=bad, run_id="r")


@given(st.integers(min_value=0, max_value=to_ms(LATEST_TIME)))
def test_to_ms_reads_every_recordable_time_as_the_strict_parser_does(ms: int) -> None:
    """to_ms reads docket's own form with the C parser (strptime was most of `docket status`'s time on a thousand
    tasks); it must agree with strptime on every time docket can record."""
    from datetime import datetime, timedelta, timezone

    stamp = from_ms(ms)
    strict = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert to_ms(stamp) == ms == (strict - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)


@pytest.mark.parametrize("stamp", ["2026-13-01T00:00:00.000Z", "2026-02-30T00:00:00.000Z", "2026-01-01T24:00:00.000Z",
                                   "2026-01-01 00:00:00.000Z", "2026-01-01T00:00:00.000", "2026-01-01T00:00:00Z", ""])
def test_to_ms_refuses_what_is_not_a_time(stamp: str) -> None:
    with pytest.raises(ValueError):
        to_ms(stamp)
