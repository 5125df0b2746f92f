"""Issue 5 item 2: no input a user can type reaches exit 70 (a bug in docket).

Hypothesis fills every command's arguments with hostile strings (empty, huge,
NUL, control and bidi characters, '..', absolute paths, huge digit strings,
negative numbers, far dates) and runs the real entry point, ``main(argv)``, in
this process against a real ledger in a real git repository that already holds
a run, a task, a worker and a lease. The commands are read from the argument
parser itself, so new commands and options are fuzzed as soon as they exist.

Whatever the input: never exit 70, never a traceback, and a failure is exactly
one ``docket: error: <code>: <message>`` line on stderr (warnings aside).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docket.cli import app

from docket.cli.console import output

from ..conftest import git

NOW = "2026-01-01T00:00:00Z"
ERROR_LINE = re.compile(r"docket: error: [a-z][a-z0-9-]*: .+")
WARNING_LINE = re.compile(r"docket: warning: [a-z][a-z0-9-]*: .+")
# Options whose fuzzing would block, or reach outside the test's folder (other files' owners test those).
SKIPPED_OPTIONS = {"--help", "--ledger", "--debug", "--follow", "--version", "--out"}
# Commands that follow a run until it closes are fuzzed drawing once (test_watch.py follows one to its end).
ALWAYS = {("watch",): ["--once"]}

HOSTILE = [
    "", " ", "\t", "\x00", "a\x00b", "\n", "x\ny", "\r", "\x1b[2J", "\x1b]0;pwned\x07", "\u202etxt.exe", "\u200b",
    "\x7f", "\x85", "\udcff", "é", "日本", ".", "..", "../..", "../../outside", "/etc/passwd", "/", "//", "wt//a",
    "./wt/a", "wt/a/", "wt/b/../a", "-1", "-0", "0", "1", "2", "+1", "1.5", "1e3", "0x10", "²", "١",
    "9" * 5000, "9223372036854775808", "9007199254740992", "9007199254740991", "18446744073709551616",
    "0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59.999Z", "10000-01-01T00:00:00Z",
    "2026-13-01T00:00:00Z", "2026-01-01T00:00:00", "5m5m", "30m1h", "0s", "99999999h", "36501d", "1h30m", "10m",
    "r1", "w1", "t1", "wt/a", "main", "HEAD", "@{-1}", "a..b", "main.lock", "refs/heads/main", "-", "--",
    "x" * 100_000, "LeaseGranted", "LeaseGranted.v1", "\udcff", "r\udcff", "wt/\udc80", "\ud800x",
]
# Names and values that exist in the world below, so that hostile values also reach the deeper checks.
PLAUSIBLE = ["r1", "w1", "t1", "wt/a", "wt/b", "main", "1", "2", "10m", "implementer", "2026-01-01T00:00:00Z"]
hostile = st.one_of(st.sampled_from(PLAUSIBLE), st.sampled_from(HOSTILE),
                    st.text(st.characters(exclude_categories=()), max_size=40),  # lone surrogates too, as argv decodes bad UTF-8
                    st.from_regex(r"-?[0-9]{1,30}", fullmatch=True))


def _leaf_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands and path:
        yield path, parser
    for action in subcommands:
        for name, sub in action.choices.items():
            yield from _leaf_parsers(sub, (*path, name))


def _value(action: argparse.Action) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(list(action.choices)), hostile) if action.choices else hostile


def _argv(path: tuple[str, ...], parser: argparse.ArgumentParser) -> st.SearchStrategy[list[str]]:
    """One invocation: positionals, required options always, others maybe, --json maybe."""
    parts: list[st.SearchStrategy[list[str]]] = []
    for action in parser._actions:
        if not action.option_strings:
            parts.append(_value(action).map(lambda v: [v]))
            continue
        flag = action.option_strings[-1]
        if flag in SKIPPED_OPTIONS:
            continue
        if action.nargs == 0:
            parts.append(st.sampled_from([[], [flag]]))
        elif action.required:
            parts.append(_value(action).map(lambda v, f=flag: [f, v]))
        else:
            parts.append(st.one_of(st.just([]), _value(action).map(lambda v, f=flag: [f, v])))
    return st.tuples(*parts).map(lambda chunks: [*path, *ALWAYS.get(path, []),
                                                 *(word for chunk in chunks for word in chunk)])


COMMANDS = st.sampled_from(list(_leaf_parsers(app.build_parser()))).flatmap(lambda c: _argv(*c))


@contextlib.contextmanager
def inside(repo: Path) -> Iterator[None]:
    """The working directory and environment a user's shell would give, restored afterwards."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    for key in [k for k in os.environ if k.startswith("DOCKET_")]:
        del os.environ[key]
    os.environ.update({"DOCKET_TESTING": "1", "DOCKET_NOW": NOW})
    os.chdir(repo)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    output._emitted = False  # one JSON document per invocation, as in a fresh process
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = app.main(argv)
        except SystemExit as e:  # argparse's --help and --version exit on their own
            code = e.code if isinstance(e.code, int) else 0
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module", autouse=True)
def serving_returns_at_once() -> Iterator[None]:
    """`docket serve` with an address and port that are fine (options may follow its arguments) would serve until
    stopped: the fuzz checks what it says and how it ends, so its server returns as soon as it would start."""
    import uvicorn

    patch = pytest.MonkeyPatch()
    patch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    try:
        yield
    finally:
        patch.undo()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose ledger holds run r1 (with a budget), task t1, worker w1 and its lease on wt/a."""
    repo = tmp_path_factory.mktemp("fuzz") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "first")
    with inside(repo):
        for argv in (["init"], ["run", "open", "--target", "main", "--goal", "g", "--id", "r1", "--budget", "2h"],
                     ["task", "plan", "r1", "--title", "t", "--id", "t1"],
                     ["worker", "register", "r1", "--role", "implementer", "--task", "t1", "--id", "w1"],
                     ["lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "10m"]):
            code, _, err = run_cli(argv)
            assert code == 0, (argv, err)
    return repo


def assert_contract(argv: list[str], code: int, stdout: str, stderr: str) -> None:
    shown = [a if len(a) < 80 else a[:40] + f"...({len(a)} chars)" for a in argv]
    assert code != app.EXIT_INTERNAL, f"docket {shown} is a bug: {stderr[:500]!r}"
    assert "Traceback" not in stderr, f"docket {shown}: {stderr[:500]!r}"
    lines = [line for line in stderr.split("\n")[:-1] if not WARNING_LINE.fullmatch(line)]
    assert stderr == "" or stderr.endswith("\n"), f"docket {shown}: {stderr[:500]!r}"
    if code == 0:
        assert lines == [], f"docket {shown} succeeded with errors: {stderr[:500]!r}"
    else:
        assert len(lines) == 1 and ERROR_LINE.fullmatch(lines[0]), f"docket {shown} exit {code}: {stderr[:500]!r}"


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(argv=COMMANDS)
def test_no_argument_reaches_exit_70(world, argv):
    with inside(world):
        assert_contract(argv, *run_cli(argv))


@pytest.mark.parametrize("argv", [
    ["run", "open", "--target", "main", "--goal", "g", "--budget", "9223372036854775808ms"],
    ["run", "open", "--target", "main", "--goal", "g", "--budget", ""],
    ["lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "99999999h"],
    ["lease", "renew", "wt/a", "--token", "9" * 5000, "--ttl", "1m"],
    ["status", "--at", "0001-01-01T00:00:00+01:00"],
    ["status", "--at", "9" * 5000],
    ["status", "--at", ""],
    ["task", "plan", "r1", "--title", "t", "--prompt-file", "\x00"],  # found by the fuzz: was exit 70
    ["go", "--goal", "g", "--tasks", "a\x00b"],
    ["ledger", "copy", "--to", "\x00"],  # found by the fuzz: was exit 70
    ["ledger", "copy", "--to", "postgresql://h/d\x00b"],
])
def test_the_issue_cases_are_bad_input_in_process(world, argv):
    with inside(world):
        code, stdout, stderr = run_cli(argv)
    assert_contract(argv, code, stdout, stderr)
    assert code == 2, stderr


@pytest.mark.parametrize("argv", [
    ["run", "pause", "r\udcff"],
    ["run", "open", "--target", "main", "--goal", "g", "--id", "\udcff"],
    ["worker", "relaunch", "w\udcff"],
    ["lease", "grant", "wt/\udcff", "--worker", "w1", "--generation", "1", "--ttl", "1m"],
])
def test_arguments_that_are_not_utf8_are_bad_input(world, argv):
    """A shell passes bytes that are not UTF-8 as lone surrogates (found by the fuzz above: exit 70)."""
    with inside(world):
        code, stdout, stderr = run_cli(argv)
    assert_contract(argv, code, stdout, stderr)
    assert code == 2, stderr
