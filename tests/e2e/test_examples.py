"""Every example a user can copy: the command lines of the code blocks of README.md and of each docs/*.md page,
then every command's --help example. README.md's lines and the --help examples run in order in one fresh
repository, each docs page's in a fresh repository of its own (a page's placeholder run id replaced by the run id
the commands before printed). An example may be refused for what the repository holds (not found, a conflict, a
failed agent), but none may be a usage error or a bug: what the docs show is what docket accepts. The README's
first run is also run as typed, shell lines and all, and must deliver; every relative link must lead somewhere."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


DOCS = sorted((ROOT / "docs").glob("*.md"))


def page_text(name: str) -> str:
    return (ROOT / name).read_text()


def _example_repository(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A fresh repository with the agents the docs name (played by the scripted agent of examples/), a check that
    passes, and the tasks file docs/go.md shows."""
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    tasks = re.search(r"```toml\n(\[\[tasks\]\].*?)```", page_text("docs/go.md"), re.DOTALL)
    assert tasks, "docs/go.md shows a tasks file"
    (repo / "tasks.toml").write_text(tasks.group(1))
    (repo / "task.md").write_text("fix the parser\n")
    agent = f'command = ["{sys.executable}", "{AGENT}", "--prompt-file", "{{prompt_file}}"]\nprompt = "file"\n\n'
    (repo / "docket.toml").write_text(  # the docs' agents, played by the scripted agent of examples/
        'agent = "claude"\n\n' + "".join(f"[agents.{name}]\n{agent}" for name in ("claude", "aider", "mine"))
        + '[checks.tests]\ncommand = ["true"]\n')
    (repo / ".gitignore").write_text("tasks.toml\ntask.md\nanchor.json\n*.jsonl\nkeys/\n*.sqlite\n")
    git(repo, "add", "docket.toml", ".gitignore")
    git(repo, "commit", "-q", "-m", "docket")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    env.update(HOME=str(home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    return repo, home, env


def _run_examples(examples: list[str], repo: Path, home: Path, env: dict[str, str]) -> list[str]:
    """Each example line in order; the failures: a usage error, a bug, or a serve that did not come up."""
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
            if done.returncode in (2, 70) or "Traceback" in done.stderr:
                failures.append(f"{line}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
            printed = RUN_ID.findall(done.stdout + done.stderr)
            if argv[1:3] in (["run", "open"], ["go", "--goal"]) and printed:
                run_id = printed[0]  # the examples after it name the run it opened
    return failures


def test_every_readme_and_help_example_runs_in_a_fresh_repository(tmp_path: Path):
    repo, home, env = _example_repository(tmp_path)
    examples = readme_examples(page_text("README.md")) + help_examples()
    assert len(examples) > 40
    assert _run_examples(examples, repo, home, env) == []


@pytest.mark.parametrize("page", [p.name for p in DOCS if readme_examples(p.read_text())])
def test_every_example_of_a_docs_page_runs_in_a_fresh_repository(tmp_path: Path, page: str):
    """Each docs page's `docket ...` lines, in order, in a repository of their own."""
    repo, home, env = _example_repository(tmp_path)
    examples = readme_examples(page_text(f"docs/{page}"))
    assert examples
    assert _run_examples(examples, repo, home, env) == []


def test_the_docs_pages_show_their_examples():
    """The pages that teach by example keep them (and so keep them tested)."""
    counted = {p.name: len(readme_examples(p.read_text())) for p in DOCS}
    assert counted["go.md"] >= 5 and counted["steps.md"] >= 20 and counted["receipts.md"] >= 1
    assert counted["machines.md"] >= 1


def test_the_step_by_step_and_agents_examples_run_as_typed_in_a_fresh_repository(tmp_path: Path):
    """docs/steps.md's "step by step" and "Agents" blocks, one line after another from `docket init`, as a user types
    them (claude played by the scripted agent of examples/, ./my-agent.sh committed), and docs/receipts.md's "Signing
    keys" command: every line exits 0."""
    from docket.adapters.world.processes.landlock import abi_version

    steps = page_text("docs/steps.md")
    examples = readme_examples(steps[steps.index("Step by step, inside"):steps.index("`run-7k2m9x4q` stands for")])
    examples += re.findall(r"^`(docket key generate --out [^`]+)`", page_text("docs/receipts.md"), re.MULTILINE)
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


def _first_run_script() -> str:
    """The ```sh blocks of the README's first run, one after another, as a person types them into one shell."""
    readme = page_text("README.md")
    section = readme[readme.index("## A first run"):readme.index("\n## ", readme.index("## A first run") + 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    assert len(blocks) >= 6, "the first run shows its commands"
    return "\n".join(blocks)


def test_the_readme_first_run_delivers_as_typed(tmp_path: Path):
    """From an empty folder to a delivered `docket go`: the README's first run, every line as it stands (the agent
    script its own, the check pytest), with `docket` and a python3 that has pytest on PATH; the placeholder run id
    of `--resume` is the run the script's `docket go` opened."""
    from docket.adapters.world.processes.landlock import abi_version

    if abi_version() < 1:
        pytest.skip("no Landlock here: the README's first run uses the default sandbox")
    script = _first_run_script()
    find_run = ("$(docket status --json | python3 -c "
                "\"import json, sys; print(json.load(sys.stdin)['runs'][0]['run_id'])\")")
    script = "set -eu\n" + script.replace(PLACEHOLDER_RUN, find_run)
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKET_", "XDG_"))}
    env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    assert (Path(sys.executable).parent / "docket").exists(), "docket is installed beside this python"
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert time.monotonic() - started < 120  # five minutes of a person's, most of it typing
    assert done.stdout.count("t1: delivered") == 2  # docket go, then docket go --resume on the ended run
    assert "chain intact" in done.stdout
    repo = work / "hello"
    assert 'return "Hello, " + name' in git(repo, "show", "HEAD:greet.py")
    assert git(repo, "status", "--porcelain") == ""  # the clean checkout moved with its branch


LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_every_relative_link_of_the_readme_and_the_docs_leads_somewhere():
    broken = []
    for page in [ROOT / "README.md", *DOCS]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists() or not where.is_relative_to(ROOT):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in LINK.findall(page_text("README.md"))}
    assert [p.name for p in DOCS if p.resolve() not in linked] == []
