"""The suite starts its longest tests first (tests/conftest.py, LONGEST_FIRST): the list names files that exist."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_the_longest_first_are_files_of_the_suite():
    assert [path for path in LONGEST_FIRST if not (ROOT / path).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
