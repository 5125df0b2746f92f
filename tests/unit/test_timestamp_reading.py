"""to_ms reads docket's written timestamps without strptime, and agrees with strptime on every input."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docket.domain.kernel.values import to_ms

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def by_strptime(timestamp):
    """What to_ms was: strptime's reading, or its ValueError's message."""
    try:
        moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError as e:
        return ("refused", str(e))
    return (moment - EPOCH) // timedelta(milliseconds=1)


def reading(timestamp):
    try:
        return to_ms(timestamp)
    except ValueError as e:
        return ("refused", str(e))


EDGES = [
    "2026-12-02T16:20:00.123Z", "1970-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00.000Z",
    "2024-02-29T00:00:00.000Z", "2023-02-29T00:00:00.000Z", "2026-00-10T00:00:00.000Z", "2026-13-10T00:00:00.000Z",
    "2026-04-31T00:00:00.000Z", "2026-01-00T00:00:00.000Z", "2026-01-01T24:00:00.000Z", "2026-01-01T23:60:00.000Z",
    "2026-01-01T23:59:60.000Z", "2026-01-01T23:59:61.000Z", "0000-01-01T00:00:00.000Z", "2026-01-01t00:00:00.000z",
    "2026-1-1T0:0:0.5Z", "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00Z", "\u0662026-01-01T00:00:00.000Z",
    "2026-01-01T00:00:00.000Z\n", " 2026-01-01T00:00:00.000Z", "", "2026-01-01T00:00:00.000",
]


@pytest.mark.parametrize("timestamp", EDGES)
def test_each_edge_reads_as_strptime_read_it(timestamp):
    assert reading(timestamp) == by_strptime(timestamp)


DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=3)


@settings(max_examples=400, deadline=None)
@given(st.tuples(st.text("0123456789", min_size=4, max_size=4), DIGITS, DIGITS, DIGITS, DIGITS, DIGITS,
                 st.text("0123456789", min_size=1, max_size=4)))
def test_any_digits_in_the_written_shape_read_as_strptime_read_them(parts):
    year, month, day, hour, minute, second, fraction = parts
    timestamp = f"{year}-{month}-{day}T{hour}:{minute}:{second}.{fraction}Z"
    assert reading(timestamp) == by_strptime(timestamp)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=253402300799999))
def test_every_recordable_millisecond_reads_back(ms):
    timestamp = (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    assert to_ms(timestamp) == ms == by_strptime(timestamp)
