"""docs/agents.md keeps its promises: every marked docket.toml block parses with docket's own loader, and each agent
gets its prompt, its own config home under {worker_dir}, exactly the credentials the page names, and the argv shown."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from docket.adapters.world.files.config_file import load_config
from docket.domain.config import AgentConfig, Config, expand
from docket.domain.containment.processes import scrub_environment

from ..agents.agents_doc import DOC, SCRIPTED_AGENT, SCRIPTED_PLACEHOLDER, agent_block, marked_blocks

PROMPT = "- fix the parser; don't $(touch pwned) \"quoted\"\nsecond line"
PROMPT_FILE = "/repo/.git/docket/prompts/abc.txt"
WORKTREE = "/home/u/.local/share/docket/workspaces/repo-0123/r1/t1"
WORKER_DIR = "/repo/.git/docket/workers/t1/1"
MCP_CONFIG = f"{WORKER_DIR}/mcp.json"
REQUESTS = f"{WORKER_DIR}/docket.sock"
DOCKET = "/opt/docket/bin/docket"

# What the page says of each agent: how the prompt reaches it, which variable is its config home, which credentials
# pass the scrub, and the argv its block expands to with the sample values above.
EXPECTED = {
    "scripted": dict(prompt="file", home=None, env_allow=[],
                     argv=["python3", SCRIPTED_PLACEHOLDER, "--prompt-file", PROMPT_FILE]),
    "claude": dict(prompt="stdin", home="CLAUDE_CONFIG_DIR", env_allow=["ANTHROPIC_API_KEY"],
                   argv=["claude", "-p", "--permission-mode", "acceptEdits", "--allowedTools", "Bash,mcp__docket",
                         "--mcp-config", MCP_CONFIG, "--strict-mcp-config", "--output-format", "json"]),
    "codex": dict(prompt="stdin", home="CODEX_HOME", env_allow=["OPENAI_API_KEY", "CODEX_API_KEY"],
                  argv=["codex", "exec", "--json", "--sandbox", "danger-full-access",
                        "-c", f'mcp_servers.docket.command="{DOCKET}"',
                        "-c", f'mcp_servers.docket.args=["mcp", "--socket", "{REQUESTS}"]',
                        "-c", "mcp_servers.docket.required=true", "-c", "mcp_servers.docket.startup_timeout_sec=30",
                        "-"]),
    "aider": dict(prompt="file", home="HOME", env_allow=["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
                  more_env=["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "GIT_CONFIG_KEY_1",
                            "GIT_CONFIG_VALUE_1"],
                  argv=["aider", "--yes-always", "--no-check-update", "--no-gitignore", "--no-auto-commits",
                        "--no-dirty-commits", "--no-analytics", "--no-pretty",
                        "--chat-history-file", f"{WORKER_DIR}/aider.chat.history.md",
                        "--input-history-file", f"{WORKER_DIR}/aider.input.history",
                        "--message-file", PROMPT_FILE]),
}


def loaded(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "docket.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def agent(tmp_path: Path, name: str) -> AgentConfig:
    config = loaded(tmp_path, marked_blocks()[f"agent: {name}"])
    assert list(config.agents) == [name]
    return config.agents[name]


def section(title: str) -> str:
    """The prose of one '## ' section of the page, its blocks left out."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return re.sub(r"```.*?```", "", text[start:end if end > 0 else None], flags=re.DOTALL)


def argv(config: AgentConfig, worker_dir: str = WORKER_DIR) -> list[str]:
    return [expand(arg, worktree=WORKTREE, worker_dir=worker_dir, prompt=PROMPT, prompt_file=PROMPT_FILE,
                   mcp_config=f"{worker_dir}/mcp.json", requests=f"{worker_dir}/docket.sock", docket=DOCKET)
            for arg in config.command]


def scripted_agent_module() -> ModuleType:
    name = "examples_scripted_agent"
    if name not in sys.modules:  # dataclasses look their module up there
        spec = importlib.util.spec_from_file_location(name, SCRIPTED_AGENT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_every_marker_introduces_a_toml_block_and_every_agent_has_one():
    text = DOC.read_text(encoding="utf-8")
    assert len(re.findall(r"^<!-- .* -->$", text, re.MULTILINE)) == len(marked_blocks(text))
    offline = [marker for marker in marked_blocks(text) if marker.startswith("agent-offline: ")]
    assert sorted(set(marked_blocks(text)) - set(offline)) == ["agent: aider", "agent: claude", "agent: codex",
                                                               "agent: scripted", "checks", "tasks"]
    assert all(marker.replace("agent-offline: ", "agent: ") in marked_blocks(text) for marker in offline)


def test_all_the_agent_blocks_together_make_one_valid_docket_toml(tmp_path):
    blocks = "\n".join(body for marker, body in marked_blocks().items() if marker.startswith("agent: "))
    config = loaded(tmp_path, blocks + "\n" + marked_blocks()["checks"])
    assert sorted(config.agents) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_prompt_reaches_the_agent_as_the_page_says(tmp_path, name):
    config = agent(tmp_path, name)
    mode = EXPECTED[name]["prompt"]
    assert config.prompt == mode
    if mode == "argument":  # the whole prompt is one argument, whatever it holds
        assert "{prompt}" in config.command and argv(config).count(PROMPT) == 1
    elif mode == "file":
        assert "{prompt_file}" in config.command and argv(config).count(PROMPT_FILE) == 1
    else:  # stdin: no argument carries it
        assert PROMPT not in argv(config) and PROMPT_FILE not in argv(config)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_worker_gets_its_own_config_home_under_its_worker_dir(tmp_path, name):
    config = agent(tmp_path, name)
    variable = EXPECTED[name]["home"]
    if variable is None:
        assert config.env == {}
        return
    assert list(config.env) == [variable, *EXPECTED[name].get("more_env", [])]
    homes = []
    for worker_dir in ("/repo/.git/docket/workers/t1/1", "/repo/.git/docket/workers/t2/1"):
        home = Path(expand(config.env[variable], worktree=WORKTREE, worker_dir=worker_dir))
        assert home == Path(worker_dir) or Path(worker_dir) in home.parents
        homes.append(home)
    assert homes[0] != homes[1]
    assert variable in section({"claude": "Claude Code", "codex": "Codex CLI", "aider": "aider"}[name])


def test_codex_home_is_the_worker_dir_itself_which_docket_makes_before_the_launch(tmp_path):
    config = agent(tmp_path, "codex")
    assert config.env["CODEX_HOME"] == "{worker_dir}"  # codex refuses a CODEX_HOME that does not exist


def test_codex_gets_docket_mcp_on_the_generations_channel_from_its_toml_overrides(tmp_path):
    """Each `-c` value is TOML once docket filled its placeholders in; together they start `docket mcp --socket
    CHANNEL` as the MCP server docket, which Codex must wait for."""
    words = argv(agent(tmp_path, "codex"))
    overrides = "\n".join(value for option, value in zip(words, words[1:]) if option == "-c")
    assert tomllib.loads(overrides) == {"mcp_servers": {"docket": {
        "command": DOCKET, "args": ["mcp", "--socket", REQUESTS], "required": True, "startup_timeout_sec": 30}}}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_env_allow_lets_through_exactly_the_credentials_the_page_names(tmp_path, name):
    config = agent(tmp_path, name)
    allowed = EXPECTED[name]["env_allow"]
    assert config.env_allow == allowed
    environ = {variable: "sk-0123456789abcdef" for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                                                                "CODEX_API_KEY", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY")}
    assert scrub_environment(environ)[0] == {}  # without env_allow, none would reach the agent
    assert sorted(scrub_environment(environ, config.env_allow)[0]) == sorted(allowed)
    if allowed:
        prose = section({"claude": "Claude Code", "codex": "Codex CLI", "aider": "aider"}[name])
        assert all(f"`{variable}`" in prose for variable in allowed)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_command_expands_to_the_argv_the_page_shows(tmp_path, name):
    assert argv(agent(tmp_path, name)) == EXPECTED[name]["argv"]


def test_the_scripted_block_names_the_real_script_once_its_path_is_filled_in(tmp_path):
    config = loaded(tmp_path, agent_block("scripted")).agents["scripted"]
    assert Path(config.command[1]) == SCRIPTED_AGENT and SCRIPTED_AGENT.is_file()


def test_the_checks_block_parses_and_requires_the_tests(tmp_path):
    config = loaded(tmp_path, marked_blocks()["checks"])
    assert config.required_checks() == ["tests"]
    assert config.checks["lint"].shell and not config.checks["lint"].required


def test_the_tasks_block_is_a_valid_tasks_file_whose_prompts_the_scripted_agent_carries_out():
    from docket.domain.plan import parse_tasks

    tasks = parse_tasks(tomllib.loads(marked_blocks()["tasks"]))
    assert [(t.id, t.depends_on) for t in tasks] == [("greet", ()), ("farewell", ()), ("main", ("greet",))]
    scripted = scripted_agent_module()
    greet = tasks[0].prompt
    (first,) = scripted.plan(greet)
    (retry,) = scripted.plan(greet + "\n\n---\n" + scripted.RETRY_MARKER + "1) was not accepted: tests.\n")
    assert (first.verb, first.path, first.text) == ("write", "greet.py", "def greet(name):\n    return 'Helo, ' + name")
    assert (retry.verb, retry.path, retry.text) == ("write", "greet.py",
                                                    "def greet(name):\n    return 'Hello, ' + name")
    assert all(scripted.plan(task.prompt) for task in tasks)


def test_each_offline_block_merged_into_its_agent_block_is_a_valid_agent_pointed_at_the_server(tmp_path):
    from ..agents.agents_doc import agent_toml, offline_agent

    names = [marker.split(": ", 1)[1] for marker in marked_blocks() if marker.startswith("agent-offline: ")]
    assert "codex" in names
    for name in names:
        merged = loaded(tmp_path, agent_toml(name, offline_agent(name, "http://127.0.0.1:8080"))).agents[name]
        page = agent(tmp_path, name)
        assert merged.command[:len(page.command)] == page.command  # the page's command, then the offline args
        assert merged.env_allow[:len(page.env_allow)] == page.env_allow
        settings = [*merged.command, *merged.env.values()]
        assert any("http://127.0.0.1:8080" in value for value in settings)
        assert not any("{model_server}" in value for value in settings)
