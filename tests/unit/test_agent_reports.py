"""What an agent reports in its output (AgentReported): each format, and nothing trusted beyond its shape."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docket.domain.reports.agent_reports import AgentReport, parse_report
from docket.domain.kernel.values import MAX_SAFE_INT

CLAUDE = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 2512, "num_turns": 3,
          "result": "Done.", "session_id": "0b9c3f6e-5a1d-4c1e-9f2a-7d1e8c2b4a10", "total_cost_usd": 0.0123456,
          "usage": {"input_tokens": 1200, "cache_read_input_tokens": 50, "output_tokens": 340}}


def test_claude_code_json_result():
    output = "some progress\n" + json.dumps(CLAUDE) + "\n"
    assert parse_report("claude-json", output) == AgentReport(
        "claude-json", session_id=CLAUDE["session_id"], input_tokens=1200, output_tokens=340, cost_micro_usd=12346,
        turns=3, is_error=False)


def test_codex_jsonl_events_add_up_over_turns():
    lines = [{"type": "thread.started", "thread_id": "0199d0a1-7b2c-7e11-a3c4-6c5d4e3f2a10"},
             {"type": "turn.started"},
             {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution"}},
             {"type": "turn.completed", "usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 30}},
             {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 12}}]
    report = parse_report("codex-jsonl", "\n".join(json.dumps(line) for line in lines))
    assert report == AgentReport("codex-jsonl", session_id=lines[0]["thread_id"], input_tokens=1000,
                                 output_tokens=42, turns=2, is_error=False)
    failed = parse_report("codex-jsonl", json.dumps({"type": "turn.failed", "error": {"message": "x"}}))
    assert failed is not None and failed.is_error is True


def test_aider_token_lines_add_up_and_the_session_cost_is_the_last():
    output = ("Applied edit to greet.py\nTokens: 2.1k sent, 96 received. Cost: $0.0032 message, $0.0064 session.\n"
              "Tokens: 1k sent, 4 received. Cost: $0.001 message, $0.0074 session.\n")
    assert parse_report("aider", output) == AgentReport("aider", input_tokens=3100, output_tokens=100,
                                                        cost_micro_usd=7400, turns=2)


@pytest.mark.parametrize("output", ["", "plain text", "{not json", json.dumps({"type": "other"}), "[1, 2]"])
def test_output_without_a_report_gives_none(output: str):
    for format in ("claude-json", "codex-jsonl", "aider"):
        assert parse_report(format, output) is None
    assert parse_report("unknown", json.dumps(CLAUDE)) is None


@pytest.mark.parametrize("field, value", [
    ("num_turns", -1), ("num_turns", MAX_SAFE_INT + 1), ("num_turns", True), ("num_turns", 2.5),
    ("total_cost_usd", -0.5), ("total_cost_usd", "NaN"), ("total_cost_usd", 1e308), ("total_cost_usd", [1]),
    ("session_id", "id\x1b[2Jwith escapes"), ("session_id", "x" * 201), ("session_id", 7),
    ("is_error", "yes"),
])
def test_a_value_out_of_shape_is_left_out_never_an_error(field: str, value: object):
    hostile = dict(CLAUDE, **{field: value})
    report = parse_report("claude-json", json.dumps(hostile))
    assert report is not None
    expected = {"num_turns": "turns", "total_cost_usd": "cost_micro_usd", "session_id": "session_id",
                "is_error": "is_error"}[field]
    assert getattr(report, expected) is None
    assert report.input_tokens == 1200  # the rest is still read


@settings(max_examples=300)
@given(st.text(max_size=400))
def test_any_output_parses_to_none_or_a_report_within_the_events_bounds(text: str):
    for format in ("claude-json", "codex-jsonl", "aider"):
        report = parse_report(format, text)
        if report is not None:
            for value in (report.input_tokens, report.output_tokens, report.cost_micro_usd, report.turns):
                assert value is None or 0 <= value <= MAX_SAFE_INT
