"""Help is laid out at the width argparse would find with shutil, which docket's parsers no longer import."""

import shutil

import pytest

from docket.cli.console.parsing import Parser, terminal_width


@pytest.mark.parametrize("columns", ["40", "100", "", "0", "-5", "wide"])
def test_the_width_is_shutils_less_two(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == shutil.get_terminal_size().columns - 2


def test_without_columns_the_width_is_shutils_less_two(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert terminal_width() == shutil.get_terminal_size().columns - 2


def test_help_is_laid_out_at_that_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    parser = Parser(prog="docket")
    parser.add_argument("--title", help="the task's title, one line; a long help that wraps at the terminal's width")
    lines = parser.format_help().splitlines()
    assert max(len(line) for line in lines) <= 48 and any(len(line) > 40 for line in lines)
