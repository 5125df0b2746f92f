"""The CLI is parse -> call -> render: no SQL in cli/, handlers referenced directly, one parser per command."""

from __future__ import annotations

import argparse
import ast
import pathlib
import re

import pytest

from docket.cli import app

CLI = pathlib.Path(app.__file__).parent
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|PRAGMA|BEGIN|COMMIT)\b")


def _sources():
    return sorted(p for p in CLI.rglob("*.py") if "_root" not in p.parts)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(CLI)))
def test_no_sql_in_cli(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in {"execute", "executemany", "executescript"}, f"{path.name}:{node.lineno}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not SQL.search(node.value), f"{path.name}:{node.lineno}: {node.value[:60]!r}"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(CLI)))
def test_no_handler_resolved_by_name(path):
    """A handler is a function referenced directly. The one exception is the command table's loader (app.py's
    _declare): it imports a command's module by the name the table gives, so that a command imports its own module
    alone; test_every_entry_of_the_command_table_is_a_declaring_function holds every entry to a real function."""
    text = path.read_text()
    if path == CLI / "app.py":
        lines = [n for n, line in enumerate(text.splitlines(), 1) if "importlib" in line]
        tree = ast.parse(text)
        (declare,) = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "_declare"]
        used = [n for n in lines if not declare.lineno <= n <= declare.end_lineno]
        assert used == [[n for n, line in enumerate(text.splitlines(), 1) if line == "import importlib"][0]]
    else:
        assert "importlib" not in text, path.name


def test_every_entry_of_the_command_table_is_a_declaring_function():
    import importlib
    import inspect

    for name, (module, function) in app.COMMANDS.items():
        declare = getattr(importlib.import_module(f"docket.cli.{module}"), function)
        assert inspect.isfunction(declare) and declare.__module__ == f"docket.cli.{module}", name
        assert list(inspect.signature(declare).parameters)[:2] == ["nouns", "common"], name
    assert len(app.COMMANDS) == len(set(app.COMMANDS)) > 30


def _leaves(parser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*path, name))


def test_every_command_has_a_handler_function_in_its_nouns_module():
    for path, parser in _leaves(app.build_parser()):
        if not path:
            continue
        handler = parser.get_default("handler")
        assert callable(handler), path
        assert handler.__module__.startswith("docket.cli."), (path, handler.__module__)


@pytest.mark.parametrize("command", list(app.COMMANDS))
def test_the_parser_built_for_one_command_has_it_alone_and_describes_it_as_the_whole_one(command):
    whole, alone = app.build_parser(), app.build_parser(only=command)
    (nouns,) = [a for a in alone._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(nouns.choices) == [command]
    (all_nouns,) = [a for a in whole._actions if isinstance(a, argparse._SubParsersAction)]
    assert nouns.choices[command].format_help() == all_nouns.choices[command].format_help()
    for path, leaf in _leaves(nouns.choices[command], (command,)):
        (whole_leaf,) = [p for q, p in _leaves(all_nouns.choices[command], (command,)) if q == path]
        assert leaf.format_help() == whole_leaf.format_help(), path


ARGVS = [
    ["status"], ["--json", "status", "r1", "--at", "3"], ["--ledger", "x.sqlite", "task", "plan", "r1", "--title", "t"],
    ["lease", "grant", "wt/a", "--worker", "w1", "--generation", "2", "--ttl", "10m", "--json"],
    ["run", "open", "--target", "main", "--goal", "g", "--ledger", "l"], ["--ledger=run", "init"], ["replay", "--until", "4"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=" ".join)
def test_parsing_with_one_commands_parser_gives_what_the_whole_parser_gives(argv):
    assert vars(app.parse_args(argv)) == vars(app.build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", [["task"], ["task", "plan"], ["lease", "grant", "x", "--generation", "0"],
                                  ["bogus"], ["status", "--bogus"]], ids=" ".join)
def test_usage_errors_are_the_whole_parsers(argv):
    with pytest.raises(app.UsageError) as whole:
        app.build_parser().parse_args(argv)
    with pytest.raises(app.UsageError) as one:
        app.parse_args(argv)
    assert str(one.value) == str(whole.value)


def test_the_readme_synopses_parse_run_abort_without_a_reason_and_logs_refuses_generation_zero():
    """The README's `docket run pause|resume|abort RUN` needs no --reason; a generation starts at 1."""
    assert app.parse_args(["run", "abort", "r1"]).reason
    with pytest.raises(app.UsageError):
        app.parse_args(["worker", "logs", "w1", "--generation", "0"])
