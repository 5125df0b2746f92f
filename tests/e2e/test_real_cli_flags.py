"""docs/agents.md's command lines hold for the real CLIs (pinned, installed by tests/agents/real_clis.py).

Each agent's block is read from the page and expanded the way docket launches it (same argv, same scrubbed
environment with the block's env, its config home a fresh worker folder); then the installed program must run
(`--version`), and the `--help` of the subcommand docket calls must list every option the block passes and every
literal word given to an option as its value (a choice such as `workspace-write`).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.files.config_file import load_config
from docket.domain.config import AgentConfig, expand, placeholders
from docket.domain.containment.processes import scrub_environment

from ..agents.agents_doc import agent_block
from ..agents.real_clis import AIDER, CLAUDE, CODEX, RealCli

FIXTURES = {"aider": ("aider_cli", AIDER), "codex": ("codex_cli", CODEX), "claude": ("claude_cli", CLAUDE)}
TIMEOUT_S = 120


def page_agent(tmp_path: Path, name: str) -> AgentConfig:
    path = tmp_path / "docket.toml"
    path.write_text(agent_block(name), encoding="utf-8")
    return load_config(path).agents[name]


def launch(tmp_path: Path, config: AgentConfig, executable: Path) -> tuple[list[str], dict[str, str]]:
    """The argv and environment docket would start the agent with (adapters/service_layer/use_cases/workers.py), the installed
    executable's folder first on PATH."""
    worktree, worker_dir = tmp_path / "worktree", tmp_path / "worker"
    worktree.mkdir()
    worker_dir.mkdir(mode=0o700)
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("- say hello\n")
    values = dict(worktree=str(worktree), worker_dir=str(worker_dir), mcp_config=str(worker_dir / "mcp.json"),
                  requests=str(worker_dir / "docket.sock"), docket="docket")
    argv = [expand(arg, **values, prompt="- say hello", prompt_file=str(prompt_file)) for arg in config.command]
    env, _ = scrub_environment(os.environ, config.env_allow)
    env = {k: v for k, v in env.items() if not k.startswith("DOCKET_")}
    env.update({name: expand(value, **values) for name, value in config.env.items()})
    env["PATH"] = f"{executable.parent}{os.pathsep}{env.get('PATH', os.defpath)}"
    return argv, env


def subcommands_and_options(command: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The words before the first option (the subcommand: `exec`), the options, and the literal words given to an
    option as its value (templates with a placeholder, and anything after `--`, left out)."""
    words = command[1:]
    first = next((i for i, word in enumerate(words) if word.startswith("-")), len(words))
    subcommands, options, values = words[:first], [], []
    for previous, word in zip([None, *words[first:]], words[first:]):
        if word == "--":
            break
        if word.startswith("-") and word != "-":
            options.append(word.split("=", 1)[0])
        elif previous is not None and previous.startswith("-") and previous != "-" and not placeholders(word) \
                and re.fullmatch(r"[A-Za-z][A-Za-z-]*", word):
            values.append(word)
    return subcommands, options, values


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def installed(request: pytest.FixtureRequest, name: str) -> tuple[Path, RealCli]:
    fixture, cli = FIXTURES[name]
    return request.getfixturevalue(fixture), cli


def test_the_page_splits_each_command_into_subcommand_options_and_values(tmp_path):
    # a -c value is TOML (mcp_servers.docket...), no word of the help: test_real_codex.py runs them
    assert subcommands_and_options(page_agent(tmp_path, "codex").command) == (
        ["exec"], ["--json", "--sandbox", "-c", "-c", "-c", "-c"], ["danger-full-access"])
    assert subcommands_and_options(page_agent(tmp_path, "claude").command) == (
        [], ["-p", "--permission-mode", "--allowedTools", "--mcp-config", "--strict-mcp-config", "--output-format"],
        ["acceptEdits", "json"])  # a tool list (Bash,mcp__docket) is no word of the help: test_real_claude.py runs it
    _, options, values = subcommands_and_options(page_agent(tmp_path, "aider").command)
    assert "--message-file" in options and "--yes-always" in options and values == []


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_installed_cli_runs_as_docket_starts_it(request, tmp_path, name):
    executable, cli = installed(request, name)
    config = page_agent(tmp_path, name)
    argv, env = launch(tmp_path, config, executable)
    assert Path(argv[0]).name == executable.name  # the page's command calls the program installed
    done = run([argv[0], "--version"], env, tmp_path / "worktree")
    assert done.returncode == 0, done.stderr
    assert cli.version in done.stdout


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_help_of_the_installed_cli_lists_every_option_the_page_passes(request, tmp_path, name):
    executable, _ = installed(request, name)
    argv, env = launch(tmp_path, page_agent(tmp_path, name), executable)
    subcommands, options, values = subcommands_and_options(argv)
    done = run([argv[0], *subcommands, "--help"], env, tmp_path / "worktree")
    assert done.returncode == 0, done.stderr
    help_text = done.stdout + done.stderr
    missing = [word for word in options + values if not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", help_text)]
    assert missing == [], f"{' '.join([argv[0], *subcommands])} --help does not list {missing}:\n{help_text}"
