"""Value conversions used by decisions: times and durations. Pure functions."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from .errors import BadInput

__all__ = ["format_duration", "from_ms", "parse_duration", "parse_time", "to_ms"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DURATION = re.compile(r"(\d+)(ms|d|h|m|s)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def to_ms(timestamp: str) -> int:
    """Milliseconds since the epoch of a docket timestamp (UTC, ms, 'Z')."""
    moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int) -> str:
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(text: str) -> str:
    """Accept an ISO-8601 time with an offset (or 'Z') and return docket's UTC form."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadInput("bad-time", f"{text!r} is not an ISO-8601 time") from None
    if moment.tzinfo is None:
        raise BadInput("bad-time", f"{text!r} has no UTC offset; add 'Z' or '+00:00'")
    return from_ms((moment - _EPOCH) // timedelta(milliseconds=1))


def parse_duration(text: str) -> int:
    """'90m', '1h30m', '45s', '250ms', '2d' -> milliseconds (> 0)."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise BadInput("bad-duration", f"{text!r} is not a duration like 90m, 1h30m, 45s or 250ms")
    ms = sum(int(n) * _UNIT_MS[u] for n, u in parts)
    if ms <= 0:
        raise BadInput("bad-duration", f"{text!r} must be longer than zero")
    return ms


def format_duration(ms: int) -> str:
    if ms <= 0:
        return "0s"
    out = []
    for unit in ("d", "h", "m", "s"):
        n, ms = divmod(ms, _UNIT_MS[unit])
        if n:
            out.append(f"{n}{unit}")
    if ms:
        out.append(f"{ms}ms")
    return "".join(out)
