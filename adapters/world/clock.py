"""The clock and id sources that the domain is given, never reads itself."""

from __future__ import annotations

import os
import time
from typing import Protocol

from ...domain.kernel.values import from_ms, parse_time, to_ms

__all__ = ["Clock", "FixedClock", "SkewedClock", "SystemClock", "clock_from_env", "new_id"]


class Clock(Protocol):
    def now(self) -> str: ...


class SystemClock:
    def now(self) -> str:
        return from_ms(time.time_ns() // 1_000_000)


class FixedClock:
    """A clock that reads a fixed time (for tests and scripted demos)."""

    def __init__(self, at: str):
        self.at = at

    def now(self) -> str:
        return self.at

    def advance(self, ms: int) -> None:
        self.at = from_ms(to_ms(self.at) + ms)


class SkewedClock:
    """The system clock off by a fixed amount: a host whose clock lies, for the tests (DOCKET_CLOCK_SKEW_MS, with
    DOCKET_TESTING=1)."""

    def __init__(self, skew_ms: int):
        self.skew_ms = skew_ms

    def now(self) -> str:
        return from_ms(time.time_ns() // 1_000_000 + self.skew_ms)


def clock_from_env() -> tuple[Clock, bool]:
    """The clock, and whether a DOCKET_NOW was ignored.

    DOCKET_NOW pins the clock only where tests and demos switch the fixed clock on
    explicitly with DOCKET_TESTING=1: a stray DOCKET_NOW in a user's shell must not
    date events in 2099 and expire every live lease.
    """
    fixed = os.environ.get("DOCKET_NOW")
    if fixed is None:
        skew = os.environ.get("DOCKET_CLOCK_SKEW_MS", "") if os.environ.get("DOCKET_TESTING") == "1" else ""
        if skew.lstrip("-").isdigit() and len(skew) <= 12:
            return SkewedClock(int(skew)), False
        return SystemClock(), False
    if os.environ.get("DOCKET_TESTING") != "1":
        return SystemClock(), True
    return FixedClock(parse_time(fixed)), False


def lease_ttl_ms(default_ms: int) -> int:
    """How long a lease docket takes lasts: default_ms, or DOCKET_LEASE_TTL_MS (at least 3 s) where tests switch it on
    with DOCKET_TESTING=1, so that a takeover after a host's death is waited out in seconds, not a minute."""
    if os.environ.get("DOCKET_TESTING") != "1":
        return default_ms
    told = os.environ.get("DOCKET_LEASE_TTL_MS", "")
    return max(3_000, int(told)) if told.isdigit() and len(told) <= 9 else default_ms


_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def new_id(prefix: str) -> str:
    """A short random id such as 'run-7k2m9x4q' (40 bits: unique within a ledger)."""
    n = int.from_bytes(os.urandom(5), "big")  # the source secrets draws from, without importing random
    return prefix + "-" + "".join(_ALPHABET[(n >> (5 * i)) & 31] for i in range(8))
