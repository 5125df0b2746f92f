"""What an agent reports about its own run in its output, read from the end of its log. Pure.

Formats (an agent's ``report`` in docket.toml):

- ``claude-json``: Claude Code's ``--output-format json``: one result object,
  ``{"type": "result", "is_error": ..., "num_turns": ..., "session_id": ...,
  "total_cost_usd": ..., "usage": {"input_tokens": ..., "output_tokens": ...}}``.
- ``codex-jsonl``: Codex CLI's ``exec --json``: one event a line;
  ``thread.started`` names the session (``thread_id``), each ``turn.completed``
  carries that turn's ``usage``, ``turn.failed`` and ``error`` say it failed.
- ``aider``: aider's text line after each message, ``Tokens: 2.1k sent, 96
  received. Cost: $0.0032 message, $0.0064 session.``: tokens add up over the
  lines (aider rounds them), the cost is the last line's session cost.

Nothing in the output is trusted beyond its shape: numbers out of range, ids with
odd characters and anything unparsable are left out (None), never an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..kernel.values import MAX_SAFE_INT

__all__ = ["FORMATS", "AgentReport", "parse_report"]

FORMATS = ("claude-json", "codex-jsonl", "aider")
_SESSION = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")
_AIDER = re.compile(r"Tokens: ([0-9.]+)([kKmM]?) sent, ([0-9.]+)([kKmM]?) received\.(?: Cost: \$([0-9.]+) message, "
                    r"\$([0-9.]+) session\.)?")


@dataclass(frozen=True)
class AgentReport:
    format: str
    session_id: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_micro_usd: int | None = None
    turns: int | None = None
    is_error: bool | None = None

    @property
    def empty(self) -> bool:
        return all(value is None for value in (self.session_id, self.input_tokens, self.output_tokens,
                                               self.cost_micro_usd, self.turns, self.is_error))


def parse_report(format: str, output: str) -> AgentReport | None:  # noqa: A002
    """The report in the agent's output (its last 64 KiB are enough), or None when it holds none."""
    if format == "claude-json":
        report = _claude(output)
    elif format == "codex-jsonl":
        report = _codex(output)
    elif format == "aider":
        report = _aider(output)
    else:
        return None
    return None if report is None or report.empty else report


def _object(value: object) -> dict[str, Any]:
    """value when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _objects(output: str) -> list[dict[str, Any]]:
    found = []
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INT:
        return None
    return value


def _session(value: Any) -> str | None:
    return value if isinstance(value, str) and _SESSION.match(value) else None


def _micro_usd(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0:
        return None
    return _count(int((amount * 1_000_000).to_integral_value()))


def _claude(output: str) -> AgentReport | None:
    results = [o for o in _objects(output) if o.get("type") == "result"]
    if not results:
        return None
    result = results[-1]
    usage = _object(result.get("usage"))
    is_error = result.get("is_error")
    return AgentReport("claude-json", session_id=_session(result.get("session_id")),
                       input_tokens=_count(usage.get("input_tokens")), output_tokens=_count(usage.get("output_tokens")),
                       cost_micro_usd=_micro_usd(result.get("total_cost_usd")), turns=_count(result.get("num_turns")),
                       is_error=is_error if isinstance(is_error, bool) else None)


def _codex(output: str) -> AgentReport | None:
    events = _objects(output)
    session = next((_session(e.get("thread_id")) for e in events if e.get("type") == "thread.started"), None)
    turns = [e for e in events if e.get("type") == "turn.completed"]
    failed = any(e.get("type") in ("turn.failed", "error") for e in events)
    if session is None and not turns and not failed:
        return None
    inputs = outputs = 0 if turns else None
    for turn in turns:
        usage = _object(turn.get("usage"))
        i, o = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
        inputs = None if inputs is None or i is None else _count(inputs + i)
        outputs = None if outputs is None or o is None else _count(outputs + o)
    return AgentReport("codex-jsonl", session_id=session, input_tokens=inputs, output_tokens=outputs,
                       turns=len(turns) + failed if (turns or failed) else None,
                       is_error=failed if (turns or failed) else None)


def _tokens(number: str, suffix: str) -> int | None:
    try:
        value = Decimal(number) * {"": 1, "k": 1_000, "m": 1_000_000}[suffix.lower()]
    except (InvalidOperation, KeyError):
        return None
    return _count(int(value.to_integral_value()))


def _aider(output: str) -> AgentReport | None:
    matches = list(_AIDER.finditer(output))
    if not matches:
        return None
    inputs: int | None = 0
    outputs: int | None = 0
    for m in matches:  # one line per message: tokens add up; the session's cost is the last line's
        i, o = _tokens(m.group(1), m.group(2)), _tokens(m.group(3), m.group(4))
        inputs = None if inputs is None or i is None else _count(inputs + i)
        outputs = None if outputs is None or o is None else _count(outputs + o)
    last = matches[-1]
    return AgentReport("aider", input_tokens=inputs, output_tokens=outputs,
                       cost_micro_usd=_micro_usd(last.group(6)) if last.group(6) else None, turns=len(matches))
