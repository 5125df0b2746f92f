"""Value conversions used by decisions: times, durations, sizes and positions. Pure functions.

Every number docket records must fit what every store and projection can hold,
so all of them stay within MAX_SAFE_INT (JSON-safe, far below SQLite's 2**63),
and every time lies between the epoch and LATEST_TIME.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from .errors import BadInput
from .codes import Code

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "DEFAULT_MAX_LOG",
    "EARLIEST_TIME",
    "LATEST_TIME",
    "MAX_DURATION_MS",
    "MAX_SAFE_INT",
    "add_ms",
    "format_cost",
    "format_duration",
    "format_size",
    "from_ms",
    "parse_cost",
    "parse_duration",
    "parse_position",
    "parse_size",
    "parse_time",
    "parse_tokens",
    "to_ms",
]

MAX_SAFE_INT = 2**53 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
EARLIEST_TIME = "1970-01-01T00:00:00.000Z"
LATEST_TIME = "9999-12-31T23:59:59.999Z"
_LATEST_MS = (datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=timezone.utc) - _EPOCH) // timedelta(milliseconds=1)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_MS = 36_500 * _UNIT_MS["d"]  # 100 years: far past any budget or lease, far below 2**53
# Units in descending order, each at most once; at most 15 ASCII digits each, so int() stays cheap.
_DURATION = re.compile(r"(?:([0-9]{1,15})d)?(?:([0-9]{1,15})h)?(?:([0-9]{1,15})m(?!s))?"
                       r"(?:([0-9]{1,15})s)?(?:([0-9]{1,15})ms)?")
_DURATION_UNITS = ("d", "h", "m", "s", "ms")
_POSITION = re.compile(r"[1-9][0-9]{0,15}")


# A timestamp as docket writes it, read without strptime (whose first use imports _strptime, calendar and locale
# and builds the locale's regular expressions: about 3 ms of every write command's start, which validates one).
_WRITTEN = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z")


def to_ms(timestamp: str) -> int:
    """Milliseconds since the epoch of a docket timestamp (UTC, ms, 'Z')."""
    written = _WRITTEN.fullmatch(timestamp) if type(timestamp) is str else None
    moment = None
    if written is not None:
        year, month, day, hour, minute, second, milli = map(int, written.groups())
        try:
            moment = datetime(year, month, day, hour, minute, second, milli * 1000, tzinfo=timezone.utc)
        except ValueError:
            pass  # strptime refuses it below, in its own words
    if moment is None:  # anything else strptime reads, or refuses, as before
        moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int) -> str:
    """docket's timestamp of a millisecond count; out of the recordable range is BadInput."""
    if not 0 <= ms <= _LATEST_MS:
        raise BadInput(Code.TIME_OUT_OF_RANGE,
                       f"{ms} ms is outside the times docket can record ({EARLIEST_TIME} to {LATEST_TIME})")
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def add_ms(timestamp: str, ms: int) -> str:
    """timestamp + ms, refused when the result is past the times docket can record."""
    total = to_ms(timestamp) + ms
    if not 0 <= total <= _LATEST_MS:
        raise BadInput(Code.TIME_OUT_OF_RANGE,
                       f"{timestamp} plus {format_duration(ms)} is past {LATEST_TIME}, the latest time docket can record")
    return from_ms(total)


def parse_time(text: str) -> str:
    """Accept an ISO-8601 time with an offset (or 'Z') and return docket's UTC form."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadInput(Code.BAD_TIME, f"{text!r} is not an ISO-8601 time") from None
    if moment.tzinfo is None:
        raise BadInput(Code.BAD_TIME, f"{text!r} has no UTC offset; add 'Z' or '+00:00'")
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)  # aware datetimes subtract without overflow
    if not 0 <= ms <= _LATEST_MS:
        raise BadInput(Code.BAD_TIME, f"{text!r} is outside the times docket can record ({EARLIEST_TIME} to {LATEST_TIME})")
    return from_ms(ms)


def parse_duration(text: str) -> int:
    """'90m', '1h30m', '45s', '250ms', '2d' -> milliseconds, more than zero and at most MAX_DURATION_MS.

    Units come in descending order (d, h, m, s, ms), each at most once.
    """
    text = text.strip()
    match = _DURATION.fullmatch(text) if text else None
    if match is None:
        raise BadInput(Code.BAD_DURATION,
                       f"{text!r} is not a duration like 90m, 1h30m, 45s or 250ms (units d h m s ms, each once, in that order)")
    ms = sum(int(n) * _UNIT_MS[u] for n, u in zip(match.groups(), _DURATION_UNITS) if n is not None)
    if ms <= 0:
        raise BadInput(Code.BAD_DURATION, f"{text!r} must be longer than zero")
    if ms > MAX_DURATION_MS:
        raise BadInput(Code.BAD_DURATION, f"{text!r} is longer than the maximum, {format_duration(MAX_DURATION_MS)}")
    return ms


DEFAULT_MAX_FILE_SIZE = 100 * 2**20  # [candidates] max_file_size, unless docket.toml says otherwise
DEFAULT_MAX_LOG = 100 * 10**6  # [agents.NAME] max_log, unless docket.toml says otherwise
_SIZE = re.compile(r"([0-9]{1,16})\s*([kmgt]i?b|b)?", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(value: int | str) -> int:
    """A number of bytes as docket.toml spells it: an integer, or a string like "100MB", "1GiB", "512KiB", "300B"
    (KB MB GB TB are powers of 1000, KiB MiB GiB TiB of 1024; units in any case) -> bytes, at least one and at most
    MAX_SAFE_INT."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadInput(Code.BAD_SIZE, f"{value!r} is not a size like 100MB, 1GiB or a number of bytes")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.fullmatch(value.strip())
        if match is None:
            raise BadInput(Code.BAD_SIZE, f"{value!r} is not a size like 100MB, 1GiB or 300B (units B KB MB GB TB "
                                       "KiB MiB GiB TiB)")
        size = int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()]
    if size <= 0:
        raise BadInput(Code.BAD_SIZE, f"{value!r} must be more than zero bytes")
    if size > MAX_SAFE_INT:
        raise BadInput(Code.BAD_SIZE, f"{value!r} is more than the maximum, {MAX_SAFE_INT} bytes")
    return size


_COST = re.compile(r"\$?([0-9]{1,12})(?:\.([0-9]{1,6}))?")
_TOKENS = re.compile(r"[0-9]{1,16}")


def parse_cost(value: int | float | str) -> int:
    """An amount of US dollars as docket.toml or a user spells it (2.50, "2.50", "$2.50", 3) -> an integer number of
    millionths of a dollar (micro-USD), more than zero and at most MAX_SAFE_INT; at most six decimal places."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadInput(Code.BAD_COST, f"{value!r} is not an amount of US dollars like 2.50")
    # a TOML float: its shortest decimal spelling, never its binary expansion (2.5 -> "2.5", not 2.4999...)
    text = _plain_decimal(repr(value)) if isinstance(value, float) else str(value).strip()
    match = _COST.fullmatch(text)
    if match is None:
        raise BadInput(Code.BAD_COST, f"{str(value)[:40]!r} is not an amount of US dollars like 2.50 (at most six "
                                   "decimal places)")
    micro = int(match.group(1)) * 1_000_000 + int((match.group(2) or "").ljust(6, "0"))
    if micro <= 0:
        raise BadInput(Code.BAD_COST, f"{text!r} must be more than zero dollars")
    if micro > MAX_SAFE_INT:
        raise BadInput(Code.BAD_COST, f"{text!r} is more than the maximum, {format_cost(MAX_SAFE_INT)}")
    return micro


def _plain_decimal(text: str) -> str:
    """'1e-05' -> '0.00001': a float's shortest spelling without an exponent (nan and inf stay as they are)."""
    from decimal import Decimal

    number = Decimal(text)
    return format(number, "f") if number.is_finite() else text


def format_cost(micro_usd: int) -> str:
    """micro-USD as a person reads dollars: '$2.50', '$0.0042', '$3.00' (cents always, further digits when set)."""
    dollars, micro = divmod(micro_usd, 1_000_000)
    return f"${dollars}.{f'{micro:06d}'.rstrip('0').ljust(2, '0')}"


def parse_tokens(value: int | str) -> int:
    """A number of tokens (input and output together): an integer, or its digits as a string; more than zero and at
    most MAX_SAFE_INT."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, str) and not _TOKENS.fullmatch(value.strip())):
        raise BadInput(Code.BAD_COUNT, f"{str(value)[:40]!r} is not a number of tokens like 2000000")
    tokens = int(value)
    if tokens <= 0:
        raise BadInput(Code.BAD_COUNT, f"{value!r} must be more than zero tokens")
    if tokens > MAX_SAFE_INT:
        raise BadInput(Code.BAD_COUNT, f"{value!r} is more than the maximum, {MAX_SAFE_INT} tokens")
    return tokens


def format_size(size: int) -> str:
    """bytes as a person reads them: '1 GiB', '100 MiB', '1.5 KiB', '300 B' (binary units, at most one decimal)."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


def parse_position(text: str) -> int:
    """A ledger position as typed by a user: 1 to MAX_SAFE_INT, plain ASCII digits."""
    if not _POSITION.fullmatch(text) or int(text) > MAX_SAFE_INT:
        raise BadInput(Code.BAD_POSITION, f"{text[:40]!r} is not a ledger position (1 to {MAX_SAFE_INT})")
    return int(text)


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
