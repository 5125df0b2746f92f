"""docket.toml: strict parsing, errors that name the key and its line, placeholders, the commented default."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from docket.adapters.world.files.config_file import MAX_CONFIG_BYTES, key_lines, load_config
from docket.domain.config import DEFAULT_TOML, Config, expand
from docket.domain.kernel.errors import BadInput

AIDER = '[agents.aider]\ncommand = ["aider", "--message", "{prompt}"]\n'


def refused(tmp_path: Path, text: str | bytes, code: str = "bad-config") -> str:
    path = tmp_path / "docket.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(BadInput) as caught:
        load_config(path)
    assert caught.value.code == code, caught.value.message
    return caught.value.message


def loaded(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "docket.toml"
    path.write_text(text)
    return load_config(path)


def test_the_default_file_parses_to_the_defaults_and_every_commented_example_is_valid():
    assert Config.model_validate(tomllib.loads(DEFAULT_TOML)) == Config()
    settings = ("# [agents.claude]", "# [agents.codex]", "# [agents.aider]", "# [checks.tests]", "# [checks.lint]",
                "# command =", "# prompt =", "# report =", "# env =", "# env_allow =", "# timeout =", "# idle_timeout =",
                "# shell =", "# required =", "# agent =", "# artifact_dir =", "# [worktree]", "# [workspace]", "# root =", "# [run]",
                "# [integration]", "# [candidates]", "# max_file_size =", "# [ledger]", "# url =", "# [git]", "# remote =",
                "# [hooks]", "# [inbox]", "# trusted =", "# deadline =", "# on_deadline =", "# default_answer =",
                "# proposals =")
    uncommented = "\n".join(line.removeprefix("# ") if line.startswith(settings) else line
                            for line in DEFAULT_TOML.splitlines())
    config = Config.model_validate(tomllib.loads(uncommented))
    assert sorted(config.agents) == ["aider", "claude", "codex"] and config.default_agent == "claude"
    assert config.agents["codex"].prompt == "stdin" and config.agents["aider"].prompt == "file"
    assert config.agents["claude"].timeout_ms == 45 * 60_000 and config.agents["claude"].idle_timeout_ms is None
    from tests.agents.agents_doc import agent_block  # the tested blocks of docs/agents.md: the same agents here
    for name in ("aider", "claude", "codex"):
        assert config.agents[name] == Config.model_validate(tomllib.loads(agent_block(name))).agents[name], name
    assert config.artifact_dir == "out/docket" and config.required_checks() == ["tests"]
    assert config.ledger.url == "postgresql://docket@db.internal/docket"
    assert (config.inbox.trusted, config.inbox.deadline_ms, config.inbox.on_deadline, config.inbox.proposals) == (
        [], 2 * 3_600_000, "wait", "queue")
    tests, lint = config.checks["tests"], config.checks["lint"]
    assert tests.timeout_ms == 20 * 60_000 and tests.argv("/e")[-1] == "--junitxml=/e/out/docket/junit.xml"
    assert lint.shell and not lint.required and lint.argv("/e")[:2] == ("/bin/sh", "-c")
    assert not any(line.startswith("# [") for line in uncommented.splitlines() if "NAME" not in line)
    # only comments: a key appended to the file is a top-level key, never one of a table above it
    assert all(not line.strip() or line.startswith("#") for line in DEFAULT_TOML.splitlines())
    assert tomllib.loads(DEFAULT_TOML + 'agent = "x"\n') == {"agent": "x"}


def test_no_file_means_the_defaults():
    assert load_config(None) == Config()


def test_a_full_file(tmp_path):
    config = loaded(tmp_path, 'agent = "aider"\n' + AIDER + 'env = { HOME = "{worker_dir}/home", P = "{port}" }\n'
                    'env_allow = ["OPENAI_*"]\ntimeout = "45m"\nidle_timeout = "90s"\n'
                    '[worktree]\nsetup = [["npm", "ci"]]\ninclude = [".env"]\nports = true\n'
                    '[run]\ntarget = "main"\nbudget = "1h30m"\n')
    aider = config.agents["aider"]
    assert (aider.timeout_ms, aider.idle_timeout_ms, aider.env_allow) == (2_700_000, 90_000, ["OPENAI_*"])
    assert config.worktree.setup == [["npm", "ci"]] and config.worktree.ports
    assert (config.run.target, config.run.budget_ms) == ("main", 5_400_000)


@pytest.mark.parametrize(("text", "expected"), [
    # unknown keys, in a table, an inline table, a dotted key, at the top
    (AIDER + 'timout = "5m"\n', 'line 3: agents.aider.timout: unknown key'),
    ('[agents]\naider = { command = ["a", "{prompt}"], timout = "1m" }\n', "line 2: agents.aider.timout: unknown key"),
    ('[agents]\naider.command = ["a", "{prompt}"]\n\naider.colour = "red"\n', "line 4: agents.aider.colour: unknown key"),
    ('[worktree]\nports = false\n[check.lint]\ncommand = ["ruff"]\n', "line 3: check: unknown key"),
    ('artifacts = "out"\n', "line 1: artifacts: unknown key"),
    # wrong types
    ('\n[worktree]\nports = "yes"\n', "line 3: worktree.ports: Input should be a valid boolean"),
    ('[worktree]\nsetup = [\n  ["make"],\n  "make",\n]\n', "line 4: worktree.setup[1]: Input should be a valid list"),
    ('[worktree]\nsetup = [\n  ["make"],\n  [],\n]\n', "line 4: worktree.setup[1]: must not be empty"),
    (AIDER.replace('"--message"', "7"), "line 2: agents.aider.command[1]: Input should be a valid string"),
    ('[[agents]]\ncommand = ["x"]\n', "line 1: agents: must be a table ([[...]] arrays of tables"),
    # durations
    (AIDER + 'timeout = "45 minutes"\n', "line 3: agents.aider.timeout: '45 minutes' is not a duration"),
    (AIDER + 'idle_timeout = 90\n', 'line 3: agents.aider.idle_timeout: a duration is a string like "45m"'),
    ('[run]\nbudget = "0s"\n', "line 2: run.budget: '0s' must be longer than zero"),
    # placeholders and prompt modes
    (AIDER.replace("{prompt}", "{promt}"), "line 2: agents.aider.command[2]: unknown placeholder {promt}"),
    (AIDER + 'env = { X = "{prompt}" }\n', "line 3: agents.aider.env.X: unknown placeholder {prompt}"),
    (AIDER.replace("{prompt}", "{prompt"), "line 2: agents.aider.command[2]: '{prompt' has a lone '{'"),
    ('[agents.a]\ncommand = ["x"]\n', 'line 1: agents.a: prompt = "argument" needs {prompt} in an argument'),
    ('[agents.a]\ncommand = ["x", "{prompt}"]\nprompt = "file"\n', 'agents.a: prompt = "file" needs {prompt_file}'),
    ('[agents.a]\ncommand = ["x", "{prompt}"]\nprompt = "stdin"\n', 'agents.a: prompt = "stdin" sends the prompt'),
    ('[agents.a]\ncommand = ["x"]\nprompt = "pipe"\n', "line 3: agents.a.prompt: Input should be 'argument'"),
    ('[agents.a]\ncommand = []\nprompt = "stdin"\n', "line 2: agents.a.command: must not be empty"),
    (AIDER.replace('"{prompt}"]', '"{prompt}", "{port}"]'), "agents: [agents.aider] uses {port}, which needs ports"),
    # names and references
    ('[agents."my agent"]\ncommand = ["x", "{prompt}"]\n', 'line 1: agents."my agent": \'my agent\' is not a valid name'),
    (AIDER + 'env = { "BAD-NAME" = "x" }\n', "line 3: agents.aider.env.BAD-NAME: 'BAD-NAME' is not an environment variable name"),
    ('agent = "claude"\n' + AIDER, "line 1: agent: 'claude' names no [agents.claude] (configured: aider)"),
    ('[run]\ntarget = "a..b"\n', "line 2: run.target: branch name 'a..b' contains '..'"),
    ('[worktree]\ninclude = ["../secrets"]\n', "line 2: worktree.include[0]: '../secrets' contains '..'"),
    ('[worktree]\ninclude = ["/etc/passwd"]\n', "line 2: worktree.include[0]: '/etc/passwd' is absolute"),
    # TOML syntax
    ('[worktree]\nports = \n', "line 2: Invalid value (column 9)"),
])
def test_each_problem_names_the_key_and_its_line(tmp_path, text, expected):
    message = refused(tmp_path, text)
    assert message.startswith("docket.toml "), message
    assert expected in message, message


def test_several_problems_are_each_named_in_line_order(tmp_path):
    message = refused(tmp_path, '[run]\nbudget = "x"\n[worktree]\nports = 1\n')
    assert message.startswith("docket.toml line 2: run.budget:") and "; line 4: worktree.ports:" in message


def test_key_lines_follow_tables_inline_tables_dotted_keys_and_arrays():
    text = ('# a comment = 1\nx = """\n[agents]\nnot = a key\n"""\n[agents."q.t"]\ncommand = [\n  "a", # c\n  "b",\n]\n'
            'env = { A = "1", B = "2" }\n[worktree]\nsetup.x = 1\n')
    lines = key_lines(text)
    assert lines[("x",)] == 2 and ("not",) not in lines and ("agents", "not") not in lines
    assert lines[("agents", "q.t")] == 6 and lines[("agents", "q.t", "command", 1)] == 9
    assert lines[("agents", "q.t", "env", "B")] == 11 and lines[("worktree", "setup", "x")] == 13


def test_an_oversized_file_is_refused(tmp_path):
    assert "larger than 1024 KiB" in refused(tmp_path, "# x\n" * (MAX_CONFIG_BYTES // 4 + 1), "config-too-large")


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    assert refused(tmp_path, b'[run]\ntarget = "caf\xe9"\n', "config-encoding").startswith(
        "docket.toml line 2: not valid UTF-8")


def test_durations_and_booleans_are_strict():
    with pytest.raises(Exception, match="valid boolean"):
        Config.model_validate({"worktree": {"ports": 1}})
    with pytest.raises(Exception, match="valid string"):
        Config.model_validate({"run": {"target": 5}})


def test_expand_fills_placeholders_and_keeps_escaped_braces():
    args = {"worktree": "/w", "worker_dir": "/d", "port": 8123}
    assert expand("{worktree}:{worker_dir}:{port}", **args) == "/w:/d:8123"
    assert expand("{{prompt}} is {prompt}", **args, prompt="hi") == "{prompt} is hi"
    assert expand("@{prompt_file}", **args, prompt_file="/p") == "@/p"
    with pytest.raises(BadInput, match="bad-placeholder"):
        expand("{port}", worktree="/w", worker_dir="/d", port=None)


def test_the_configuration_is_frozen():
    config = Config()
    with pytest.raises(Exception):
        config.worktree = None  # type: ignore[misc]


def test_the_configuration_reference_example_is_a_valid_configuration():
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    example = page[page.index("```toml\n", page.index("# Configuration: docket.toml")) + 8:]
    config = Config.model_validate(tomllib.loads(example[:example.index("```")]))
    assert config.default_agent == "claude" and config.worktree.ports


def test_workspace_root_is_absolute_or_under_home(tmp_path):
    from docket.adapters.service_layer.go.settings import workspace_root

    assert loaded(tmp_path, "[workspace]\nroot = \"/srv/docket\"\n").workspace.root == "/srv/docket"
    assert workspace_root(loaded(tmp_path, "[workspace]\nroot = \"~/work\"\n")) == Path.home() / "work"
    assert workspace_root(loaded(tmp_path, "")) is None
    assert "workspace.root" in refused(tmp_path, "[workspace]\nroot = \"relative/place\"\n")


def test_run_checks_is_unset_by_default_and_in_the_commented_default_file(tmp_path):
    assert Config().run.checks is None
    assert "\n# checks = 4\n" in DEFAULT_TOML
    assert loaded(tmp_path, "[run]\nchecks = 8\n").run.checks == 8


@pytest.mark.parametrize(("text", "expected"), [
    ("[run]\nchecks = 0\n", "line 2: run.checks: Input should be greater than or equal to 1"),
    ("[run]\nchecks = 257\n", "line 2: run.checks: Input should be less than or equal to 256"),
    ('[run]\nchecks = "4"\n', "line 2: run.checks: Input should be a valid integer"),
])
def test_a_number_of_checks_out_of_range_is_bad_config(tmp_path, text, expected):
    assert expected in refused(tmp_path, text)


def test_go_runs_as_many_checks_at_once_as_given_else_configured_else_the_machines_cores(tmp_path, monkeypatch):
    import os

    from docket.adapters.service_layer.go.settings import Agent, settings_from_config
    from docket.domain.containment.sandbox import Confinement

    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    agent = Agent("a", ("a", "{prompt}"), confinement=Confinement(mode="off"))

    def slots(text: str, given: int | None) -> int:
        settings = settings_from_config(loaded(tmp_path, text), agent, repository=tmp_path / "absent.git",
                                        ledger_path=tmp_path / "ledger.sqlite", checks=given)
        return settings.check_slots

    assert (slots("", None), slots("[run]\nchecks = 2\n", None), slots("[run]\nchecks = 2\n", 3)) == (6, 2, 3)
