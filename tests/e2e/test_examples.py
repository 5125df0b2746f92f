"""Every example a user can copy: the command lines of README.md's code blocks, then every command's --help
example, run in order in one fresh repository (the README's placeholder run id replaced by the run id the
commands before printed). An example may be refused for what the repository holds (not found, a conflict, a
failed agent), but none may be a usage error or a bug: what the docs show is what docket accepts."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from docket.cli.app import build_parser
from tests.conftest import git, make_repo
from tests.e2e.go_world import AGENT

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER_RUN = "run-7k2m9x4q"
RUN_ID = re.compile(r"\brun-[0-9a-z]{8}\b")
ERROR_LINE = re.compile(r"^docket: error: ([a-z][a-z0-9-]*): ", re.MULTILINE)
SYNOPSIS = re.compile(r"\[--|\bRUN\b|\bTEXT\b|pause\|")  # a synopsis line, not an example


def readme_examples(text: str) -> list[str]:
    """The `docket ...` lines of the README's indented and ```sh blocks, in order (synopsis lines left out)."""
    lines, fenced = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = None if fenced is not None else line[3:].strip()
            continue
        if fenced is not None and fenced not in ("sh", "bash", ""):
            continue
        command = line.strip() if fenced is not None else (line[4:] if line.startswith("    ") else "")
        if command.startswith("docket ") and not SYNOPSIS.search(command.split("  #")[0]):
            lines.append(command)
    return lines


def help_examples() -> list[str]:
    lines = []

    def walk(parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        epilog = parser.epilog or ""
        if not subs and "example:\n" in epilog:
            for line in epilog.split("example:\n", 1)[1].splitlines():
                if not line.startswith("  docket "):
                    break
                lines.append(line.strip())
        for sub in subs:
            for child in sub.choices.values():
                walk(child)

    walk(build_parser())
    return lines


def commands_of(line: str, home: Path) -> list[tuple[list[str], str | None]]:
    """One example line as shell would run it: commands split at && and ;, each with its > file, if any."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[tuple[list[str], str | None]] = []
    words: list[str] = []
    out: str | None = None
    tokens = iter(lexer)
    for token in tokens:
        if token in ("&&", ";"):
            commands.append((words, out))
            words, out = [], None
        elif token == ">":
            out = next(tokens)
        else:
            words.append(str(home) + token[1:] if token.startswith("~/") else token)
    commands.append((words, out))
    return [(w, o) for w, o in commands if w]


def served_until_stopped(argv: list[str], repo: Path, env: dict[str, str], line: str) -> list[str]:
    """`docket serve ...` as an example: on a free port, it prints its URL and serves until it is stopped."""
    words = list(argv[1:])
    if "--port" in words:
        words[words.index("--port") + 1] = "0"  # the documented port may be taken on this machine
    else:
        words += ["--port", "0"]
    process = subprocess.Popen([sys.executable, "-m", "docket", *words], cwd=repo, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        said = process.stdout.readline()  # type: ignore[union-attr]
        alive = process.poll() is None
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    if not (said.startswith("http://127.0.0.1:") and "?token=" in said and alive):
        return [f"{line}: did not come up serving: {said.strip()[:80]} {err.strip()[-300:]}"]
    return []


def test_every_readme_and_help_example_runs_in_a_fresh_repository(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    readme = (ROOT / "README.md").read_text()
    tasks = re.search(r"```toml\n(\[\[tasks\]\].*?)```", readme, re.DOTALL)
    assert tasks, "the README shows a tasks file"
    (repo / "tasks.toml").write_text(tasks.group(1))
    (repo / "task.md").write_text("fix the parser\n")
    (repo / "docket.toml").write_text(  # the README's agent, played by the scripted agent of examples/
        f'[agents.claude]\ncommand = ["{sys.executable}", "{AGENT}", "--prompt-file", "{{prompt_file}}"]\n'
        'prompt = "file"\n\n'
        f'[agents.aider]\ncommand = ["{sys.executable}", "{AGENT}", "--prompt-file", "{{prompt_file}}"]\n'
        'prompt = "file"\n\n[checks.tests]\ncommand = ["true"]\n')
    (repo / ".gitignore").write_text("tasks.toml\ntask.md\nanchor.json\n*.jsonl\nkeys/\n")
    git(repo, "add", "docket.toml", ".gitignore")
    git(repo, "commit", "-q", "-m", "docket")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    env.update(HOME=str(home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    examples = readme_examples(readme) + help_examples()
    assert len(examples) > 40
    run_id = PLACEHOLDER_RUN
    failures = []
    for line in examples:
        for words, out in commands_of(line, home):
            argv = [word.replace(PLACEHOLDER_RUN, run_id) for word in words]
            started = time.monotonic()
            if argv[1:2] == ["serve"]:  # it serves until stopped: it must come up, say its URL and keep serving
                failures += served_until_stopped(argv, repo, env, line)
                continue
            try:
                done = subprocess.run([sys.executable, "-m", "docket", *argv[1:]], cwd=repo, env=env,
                                      capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                failures.append(f"{line}: still running after 240 s")
                continue
            print(f"{time.monotonic() - started:6.1f}s exit {done.returncode} {line}")
            if out is not None:
                (repo / out).write_text(done.stdout)
            codes = ERROR_LINE.findall(done.stderr)
            if done.returncode in (2, 70) or "Traceback" in done.stderr:
                failures.append(f"{line}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
            printed = RUN_ID.findall(done.stdout + done.stderr)
            if argv[1:3] in (["run", "open"], ["go", "--goal"]) and printed:
                run_id = printed[0]  # the examples after it name the run it opened
    assert failures == []


def test_the_step_by_step_and_agents_examples_run_as_typed_in_a_fresh_repository(tmp_path: Path):
    """README's "step by step" and "Agents" blocks, one line after another from `docket init`, as a user types them
    (claude played by the scripted agent of examples/, ./my-agent.sh committed), and "Signing keys"' command: every
    line exits 0."""
    from docket.adapters.world.landlock import abi_version

    readme = (ROOT / "README.md").read_text()
    examples = readme_examples(readme[readme.index("Or step by step"):readme.index("`run-7k2m9x4q` stands for")])
    examples += re.findall(r"^`(docket key generate --out [^`]+)`", readme, re.MULTILINE)
    assert any("--at" in line for line in examples) and any("worker stop" in line for line in examples)
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    (repo / "task.md").write_text("write parser.py: X = 1\n")
    (repo / "my-agent.sh").write_text("#!/bin/sh\necho fast \"$@\"\n")
    (repo / "my-agent.sh").chmod(0o755)
    (repo / "docket.toml").write_text(("" if abi_version() >= 1 else 'sandbox = "off"\n') + (
        f'[agents.claude]\ncommand = ["{sys.executable}", "{AGENT}", "--prompt-file", "{{prompt_file}}"]\n'
        'prompt = "file"\n'))
    (repo / ".gitignore").write_text("task.md\nanchor.json\n")
    git(repo, "add", "docket.toml", ".gitignore", "my-agent.sh")
    git(repo, "commit", "-q", "-m", "docket")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKET_", "XDG_"))}
    env.update(HOME=str(home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    if abi_version() < 1:  # sandbox = "off" is honoured only for a docket.toml its user trusts
        subprocess.run([sys.executable, "-m", "docket", "config", "trust"], cwd=repo, env=env, check=True,
                       capture_output=True)
    run_id, failures = PLACEHOLDER_RUN, []
    for line in examples:
        for words, out in commands_of(line, home):
            argv = [word.replace(PLACEHOLDER_RUN, run_id) for word in words]
            done = subprocess.run([sys.executable, "-m", "docket", *argv[1:]], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
            if out is not None:
                (repo / out).write_text(done.stdout)
            if done.returncode != 0:
                failures.append(f"{line}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
            if argv[1:3] == ["run", "open"]:
                run_id = RUN_ID.findall(done.stdout)[0]
    assert failures == []
    assert (repo / "keys" / "docket.key").is_file()
