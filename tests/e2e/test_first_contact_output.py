"""Output that cannot be written is the user's pipe or terminal, not a bug in docket (exit 70).

- A terminal whose encoding cannot show a character (PYTHONIOENCODING=ascii, latin-1) gets an escape in its place;
  --json stays valid JSON there (\\uXXXX escapes) and means the same strings.
- A closed stdout (`docket status >&-`) or a full one (`> /dev/full`) is `output-failed`, exit 9, in one line on
  stderr; with stderr closed too, exit 9 quietly.
- `docket go` whose stdout went away still drives its run to an end (its output is not its work), then exits 9.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.go_world import make_go_world

GOAL = "fix the café test ☕ ünïcode 😀"
OUTPUT_FAILED = 9


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("DOCKET_", "PYTHONIOENCODING", "LC_", "LANG"))}


def _run(repo: Path, *args: str, env: dict[str, str] | None = None, close: tuple[int, ...] = (),
         stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    """docket ARGS in repo, with the file descriptors in close closed when it starts (as a shell's `>&-` does)."""
    def closing() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run([sys.executable, "-m", "docket", *args], cwd=repo, env=env or _env(), stdout=stdout,
                          stderr=subprocess.PIPE, preexec_fn=closing if close else None, timeout=300)


@pytest.fixture
def opened(repo: Path) -> Path:
    """A repository with a ledger and a run whose goal no ASCII or latin-1 terminal can show."""
    for args in (("init",), ("run", "open", "--target", "main", "--goal", GOAL, "--id", "r1")):
        done = _run(repo, *args)
        assert done.returncode == 0, done.stderr
    return repo


def _one_error_line(stderr: bytes, code: str) -> str:
    text = stderr.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    (line,) = text.splitlines()
    assert line.startswith(f"docket: error: {code}: "), line
    return line


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_show_a_goal_gets_escapes_not_a_crash(opened: Path, encoding: str):
    env = {**_env(), "PYTHONIOENCODING": encoding}
    done = _run(opened, "status", env=env)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode(encoding)
    assert "r1" in text and "fix the caf" in text
    assert "?" not in text.split("fix the caf", 1)[1]  # escaped (\\u2615), not lost
    # --json: still one valid document, meaning the very strings of the ledger
    for args in (("status", "--json"), ("log", "--json"), ("status", "r1", "--json")):
        done = _run(opened, *args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        document = json.loads(done.stdout.decode(encoding))
        assert GOAL in json.dumps(document, ensure_ascii=False), args


def test_the_c_locale_shows_the_goal(opened: Path):
    done = _run(opened, "status", env={**_env(), "LC_ALL": "C"})
    assert done.returncode == 0, done.stderr


def test_an_error_message_a_terminal_cannot_show_is_escaped(opened: Path):
    done = _run(opened, "status", "run-☕", env={**_env(), "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 5, done.stderr
    _one_error_line(done.stderr, "run-not-found")


@pytest.mark.parametrize("args", [("status",), ("verify",), ("log",), ("log", "--json"), ("inbox",), ("--version",),
                                  ("run", "pause", "r1")])
def test_a_closed_stdout_is_output_failed(opened: Path, args: tuple[str, ...]):
    done = _run(opened, *args, close=(1,), stdout=None)
    assert done.returncode == OUTPUT_FAILED, done.stderr
    _one_error_line(done.stderr, "output-failed")
    if args[0] == "run":  # the work was done and recorded: only saying so failed
        status = _run(opened, "status", "r1", "--json")
        assert json.loads(status.stdout)["run"]["status"] == "paused"


def test_init_with_a_closed_stdout_makes_the_ledger_and_says_output_failed(repo: Path):
    done = _run(repo, "init", close=(1,), stdout=None)
    assert done.returncode == OUTPUT_FAILED, done.stderr
    _one_error_line(done.stderr, "output-failed")
    assert (repo / ".git" / "docket" / "ledger.sqlite").is_file()
    assert _run(repo, "verify").returncode == 0


@pytest.mark.parametrize("args", [("status",), ("version",), ("log",)])
def test_stdout_and_stderr_closed_exit_quietly_with_output_failed(opened: Path, args: tuple[str, ...]):
    argv = ("--version",) if args == ("version",) else args
    done = subprocess.run([sys.executable, "-m", "docket", *argv], cwd=opened, env=_env(),
                          preexec_fn=lambda: (os.close(1), os.close(2)), timeout=120)
    assert done.returncode == OUTPUT_FAILED


def test_a_closed_stderr_alone_changes_nothing(opened: Path):
    done = subprocess.run([sys.executable, "-m", "docket", "status", "--json"], cwd=opened, env=_env(),
                          stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2), timeout=120)
    assert done.returncode == 0
    assert json.loads(done.stdout)["runs"]
    failing = subprocess.run([sys.executable, "-m", "docket", "status", "no-such-run"], cwd=opened, env=_env(),
                             stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2), timeout=120)
    assert failing.returncode == 5  # its error has nowhere to go; its exit code still says it


@pytest.mark.parametrize("args", [("log", "--json"), ("log",), ("status",), ("status", "--json"), ("verify", "--json")])
def test_a_full_stdout_is_output_failed(opened: Path, args: tuple[str, ...]):
    with open("/dev/full", "wb") as full:
        done = _run(opened, *args, stdout=full)
    assert done.returncode == OUTPUT_FAILED, done.stderr
    _one_error_line(done.stderr, "output-failed")


ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "add the greeting"\nprompt = "write greet.py: print(1)"\n'


@pytest.mark.parametrize("json_output", [False, True])
def test_go_with_a_closed_stdout_drives_its_run_to_an_end(tmp_path: Path, json_output: bool):
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    args = ["go", "--goal", GOAL, "--tasks", "tasks.toml", "--id", "r1", *(["--json"] if json_output else [])]
    done = subprocess.run(world.argv(*args), cwd=world.repo, env=world.env, stderr=subprocess.PIPE,
                          preexec_fn=lambda: os.close(1), timeout=300)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == OUTPUT_FAILED, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("docket: error: output-failed: "), err
    status = world.json("status", "r1")
    assert status["run"]["status"] == "completed", status["run"]
    assert world.file_at("main", "greet.py") == "print(1)\n"
    assert world.run("verify").returncode == 0
