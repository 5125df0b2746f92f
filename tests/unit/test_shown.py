"""shown(): what a user typed reaches the terminal as visible escapes, never as control."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from docket.cli.console.output import shown
from docket.domain.kernel.names import has_unsafe_characters


def test_controls_bidi_and_invisible_characters_become_escapes():
    assert shown("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert shown("\x1b[2J\x1b]0;pwned\x07") == "\\x1b[2J\\x1b]0;pwned\\x07"
    assert shown("\x00\x7f\x85\x9b") == "\\x00\\x7f\\x85\\x9b"
    assert shown("\u202eexe.txt\u2066\u061c\u200f") == "\\u202eexe.txt\\u2066\\u061c\\u200f"
    assert shown("a\u200bb\u2028c\u2029") == "a\\u200bb\\u2028c\\u2029"
    assert shown("\ud800") == "\\ud800"
    assert shown("\U000e0001") == "\\U000e0001"


def test_printable_text_is_unchanged():
    for text in ["fix the flaky test", "caf\u00e9 \u65e5\u672c \U0001f600", "C:\\path\\x1b", "", "a  b"]:
        assert shown(text) == text
    assert shown(42) == "42"


@given(st.text())
def test_the_result_is_one_safe_line(text):
    result = shown(text)
    assert not has_unsafe_characters(result)
    assert len(result.splitlines()) <= 1
