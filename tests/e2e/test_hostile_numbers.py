"""Issue 5 item 2, through the real CLI: out-of-range numbers and times are bad input (exit 2).

Before the fix, `--budget 9223372036854775808ms` was recorded and every later
command that updates views exited 70 for good; a huge --ttl, a year-1 --at and a
clock near the year 9999 exited 70 too; `--budget ""` meant no budget and
`5m5m` meant ten minutes.
"""

from __future__ import annotations

import re

import pytest

from ..conftest import Docket, Result

ERROR_LINE = re.compile(r"docket: error: ([a-z][a-z0-9-]*): (.+)\n")
HUGE_DIGITS = "9" * 5000


def assert_bad_input(result: Result, code: str | None = None) -> None:
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr!r}"
    match = ERROR_LINE.fullmatch(result.stderr)
    assert match, f"stderr is not one error line: {result.stderr!r}"
    if code:
        assert match.group(1) == code, result.stderr


def events(docket: Docket) -> list[str]:
    return [e["type"] for e in docket("log", "--json").json()["events"]]


@pytest.fixture
def world(docket: Docket) -> Docket:
    """A run r1 with worker w1 at generation 1, on a ledger whose clock may be pinned."""
    docket.env["DOCKET_TESTING"] = "1"  # DOCKET_NOW is honoured only in tests
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("worker", "register", "r1", "--role", "implementer", "--id", "w1")
    return docket


@pytest.mark.parametrize("budget", ["9223372036854775808ms", "", "   ", "5m5m", "30m1h", "36501d", HUGE_DIGITS + "ms"])
def test_a_budget_out_of_range_or_malformed_is_refused_and_nothing_is_recorded(world, budget):
    before = events(world)
    result = world("run", "open", "--target", "main", "--goal", "g", "--id", "r2", "--budget", budget, check=False)
    assert_bad_input(result, "bad-duration")
    assert events(world) == before
    world("task", "plan", "r1", "--title", "later commands still work")
    assert world("status", "--json").json()


@pytest.mark.parametrize("ttl", ["99999999h", "9223372036854775808ms", HUGE_DIGITS + "s", "1m1m"])
def test_a_ttl_out_of_range_is_refused(world, ttl):
    result = world("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", ttl, check=False)
    assert_bad_input(result, "bad-duration")


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z", ""])
def test_status_at_a_time_docket_cannot_record_is_refused(world, at):
    assert_bad_input(world("status", "--at", at, check=False), "bad-time")


@pytest.mark.parametrize("at", ["9007199254740992", HUGE_DIGITS, "²", "0"])
def test_status_at_a_position_out_of_range_is_refused(world, at):
    assert_bad_input(world("status", "--at", at, check=False))


@pytest.mark.parametrize("args", [
    ("lease", "grant", "wt/a", "--worker", "w1", "--generation", "9007199254740992", "--ttl", "1m"),
    ("lease", "grant", "wt/a", "--worker", "w1", "--generation", HUGE_DIGITS, "--ttl", "1m"),
    ("lease", "renew", "wt/a", "--token", "9223372036854775808", "--ttl", "1m"),
    ("lease", "release", "wt/a", "--token", "²"),
    ("replay", "--until", HUGE_DIGITS),
])
def test_every_number_a_user_types_is_bounded(world, args):
    assert_bad_input(world(*args, check=False), "usage")


def test_a_clock_near_the_last_recordable_time_refuses_a_lease_past_it(world):
    result = world("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "10m",
                   now="9999-12-31T23:59:00Z", check=False)
    assert_bad_input(result, "time-out-of-range")
    assert "LeaseGranted.v1" not in events(world)
    world("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "30s", now="9999-12-31T23:59:00Z")
