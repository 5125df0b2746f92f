"""docket.toml through the CLI: found from any worktree, `docket config show`, and the default `docket init` writes."""

from __future__ import annotations

from docket.adapters.world.files.paths import task_worktree_path
from docket.domain.containment.protected import DEFAULT_PROTECTED
import re
import subprocess
import sys
from pathlib import Path

from docket.adapters.world.files.config_file import find_config, write_default
from docket.domain.config import DEFAULT_TOML

from ..conftest import Docket, git

ERROR_LINE = re.compile(r"docket: error: ([a-z-]+): (.*)\n")
AGENT = '[agents.aider]\ncommand = ["aider", "--message", "{prompt}"]\ntimeout = "45m"\n'


def error_of(result) -> tuple[int, str, str]:
    match = ERROR_LINE.fullmatch(result.stderr)
    assert match, result.stderr
    return result.returncode, match.group(1), match.group(2)


def test_init_writes_the_commented_default_once_and_leaves_an_edited_file_alone(docket, repo):
    first = docket("init", "--json").json()
    config = repo / "docket.toml"
    assert (first["config"], first["config_created"]) == (str(config.resolve()), True)
    assert config.read_text() == DEFAULT_TOML
    config.write_text(AGENT)
    second = docket("init")
    assert "configuration" not in second.stdout and config.read_text() == AGENT
    assert docket("init", "--json").json()["config_created"] is False


def test_init_says_it_wrote_the_file(docket, repo):
    out = docket("init").stdout
    assert out.splitlines()[1] == f"wrote a commented default configuration {(repo / 'docket.toml').resolve()}"


def test_init_outside_a_checkout_writes_no_config(docket, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    doc = Docket(outside, docket.env)("init", "--ledger", str(tmp_path / "l.sqlite"), "--json").json()
    assert (doc["config"], doc["config_created"]) == (None, False)
    assert not list(outside.iterdir())


def test_config_show_json_is_one_document_with_durations_in_ms(docket, repo):
    (repo / "docket.toml").write_text(AGENT)
    doc = docket("config", "show", "--json").json()
    assert doc["file"] == str((repo / "docket.toml").resolve())
    aider = doc["config"]["agents"]["aider"]
    assert aider["timeout_ms"] == 2_700_000 and aider["command"] == ["aider", "--message", "{prompt}"]
    human = docket("config", "show").stdout
    assert '[agents.aider]\ncommand = ["aider", "--message", "{prompt}"]' in human and 'timeout = "45m"' in human


def test_config_show_without_a_file_shows_the_defaults(docket, repo):
    doc = docket("config", "show", "--json").json()
    assert doc["file"] is None and doc["config"]["worktree"] == {"setup": [], "include": [], "ports": False}
    assert docket("config", "show").stdout.startswith(f"# defaults (no {(repo / 'docket.toml').resolve()})")


def test_a_bad_config_is_one_line_naming_key_and_line_with_exit_2(docket, repo):
    (repo / "docket.toml").write_text(AGENT + 'timout = "5m"\n')
    result = docket("config", "show", check=False)
    assert error_of(result) == (2, "bad-config", "docket.toml line 4: agents.aider.timout: unknown key")
    assert result.stdout == ""


def test_found_from_a_subdirectory_a_linked_worktree_and_a_docket_task_worktree(docket, repo, tmp_path):
    (repo / "docket.toml").write_text(AGENT)
    (repo / "a" / "b").mkdir(parents=True)
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"), "-b", "feature")
    task_tree = task_worktree_path(repo / ".git", "r1", "t1")
    git(repo, "worktree", "add", "-q", str(task_tree), "-b", "docket/r1/t1")
    (task_tree / "deep").mkdir()
    for place in (repo / "a" / "b", tmp_path / "linked", task_tree / "deep"):
        assert find_config(place) == (repo / "docket.toml").resolve(), place
        doc = Docket(place, docket.env)("config", "show", "--json").json()
        assert list(doc["config"]["agents"]) == ["aider"], place


def test_a_bare_repository_and_no_repository_have_no_config(tmp_path):
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    assert find_config(bare) is None
    (tmp_path / "plain").mkdir()
    assert find_config(tmp_path / "plain") is None


def test_a_symlinked_docket_toml_is_refused_never_followed(docket, repo, tmp_path):
    outside = tmp_path / "elsewhere.toml"
    outside.write_text(AGENT)
    (repo / "docket.toml").symlink_to(outside)
    assert error_of(docket("config", "show", check=False))[:2] == (2, "config-symlink")
    (repo / "docket.toml").unlink()
    (repo / "docket.toml").symlink_to(tmp_path / "missing.toml")  # dangling: init must not create its target
    assert docket("init", "--json").json()["config_created"] is False
    assert not (tmp_path / "missing.toml").exists()
    assert error_of(docket("config", "show", check=False))[:2] == (2, "config-symlink")


def test_write_default_is_create_only(tmp_path):
    assert write_default(tmp_path) is True
    (tmp_path / "docket.toml").write_text("# mine\n")
    assert write_default(tmp_path) is False
    assert (tmp_path / "docket.toml").read_text() == "# mine\n"


def test_status_does_not_import_the_configuration(docket, repo):
    (repo / "docket.toml").write_text(AGENT)
    docket("init")
    probe = ("import sys, io, contextlib\n"
             "from docket.cli.app import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    code = main(['status', '--json'])\n"
             "config = {'docket.domain.config', 'docket.adapters.world.files.config_file', 'docket.cli.steps.config', 'tomllib'}\n"
             "print(code, sorted(set(sys.modules) & config))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=repo, env=docket.env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "0 []"


def test_help_lists_config_show(docket):
    assert "config" in docket("--help").stdout
    assert "docket config show --json" in docket("config", "show", "--help").stdout


def test_a_ledger_is_not_needed_to_show_the_config(docket, repo):
    assert not Path(docket.ledger).exists()
    assert docket("config", "show", "--json").json()["file"] is None


CHECKS = ('artifact_dir = "./out//docket/"\n'
          '[checks.tests]\ntimeout = "20m"\ncommand = ["pytest", "--junitxml={worktree}/out/docket/j.xml"]\n'
          'env = { CI = "1" }\n'
          '[checks."lint.all"]\ncommand = ["ruff check . && echo ${HOME}"]\nshell = true\nrequired = false\n')


def test_config_show_prints_checks_and_the_artifact_directory(docket, repo):
    (repo / "docket.toml").write_text(CHECKS)
    config = docket("config", "show", "--json").json()["config"]
    assert config["artifact_dir"] == "out/docket"
    assert config["checks"]["tests"] == {
        "command": ["pytest", "--junitxml={worktree}/out/docket/j.xml"], "shell": False, "timeout_ms": 1_200_000,
        "idle_timeout_ms": None, "required": True, "env": {"CI": "1"}, "env_allow": [], "junit": None, "judge": "exit",
        "read": [], "write": [], "network": "none", "protected": list(DEFAULT_PROTECTED)}
    assert config["checks"]["lint.all"]["shell"] is True and config["checks"]["lint.all"]["required"] is False
    human = docket("config", "show").stdout
    assert 'artifact_dir = "out/docket"\n' in human
    assert ('[checks.tests]\ncommand = ["pytest", "--junitxml={worktree}/out/docket/j.xml"]\nshell = false\n'
            'timeout = "20m"\nrequired = true\nenv = { CI = "1" }\n') in human
    assert '[checks."lint.all"]\ncommand = ["ruff check . && echo ${HOME}"]\nshell = true\ntimeout = "10m"\n' in human


def test_config_show_is_toml_that_reads_back_as_the_same_configuration(docket, repo):
    import tomllib

    from docket.domain.config import Config

    agent = '[agents."q.t"]\ncommand = ["a", "{prompt}"]\nenv = { H = "{worker_dir}" }\n'
    hooks = '[hooks]\ntask-finished = ["notify", "done"]\nrun-finished = { command = ["x"], timeout = "5s" }\n'
    integration = '[integration]\napproval = true\nchecked_out_target = "refuse"\n'
    (repo / "docket.toml").write_text(CHECKS + agent + hooks + integration)
    shown = docket("config", "show").stdout
    assert Config.model_validate(tomllib.loads(shown)) == Config.model_validate(tomllib.loads(
        (repo / "docket.toml").read_text()))
    (repo / "docket.toml").unlink()
    assert "# artifact_dir: not set\n" in docket("config", "show").stdout


def test_lines_appended_to_the_default_file_stay_top_level_and_every_unknown_key_is_named(docket, repo):
    docket("init")
    config = repo / "docket.toml"
    lines = len(config.read_text().splitlines())
    config.write_text(config.read_text() + 'agent = "scripted"\n[agents.scripted]\ncommand = ["true", "{prompt}"]\n')
    assert docket("config", "show", "--json").json()["config"]["default_agent"] == "scripted"
    config.write_text(config.read_text() + '[run]\ntarget = "main"\nbudgte = "1h"\ntimout = "5m"\n')
    result = docket("config", "show", check=False)
    assert error_of(result) == (2, "bad-config", f"docket.toml line {lines + 6}: run.budgte: unknown key; "
                                                 f"line {lines + 7}: run.timout: unknown key")


def test_env_allow_everything_is_warned_of_and_still_shown(docket, repo):
    (repo / "docket.toml").write_text(AGENT + 'env_allow = ["*"]\n')
    shown = docket("config", "show", "--json")
    assert shown.returncode == 0
    assert shown.stderr.startswith("docket: warning: env-allow-everything: [agents.aider] env_allow = [\"*\"] lets "
                                   "every credential")
    assert shown.json()["config"]["agents"]["aider"]["env_allow"] == ["*"]


def test_a_syntax_error_in_the_default_file_does_not_block_reading(docket, repo):
    """The default docket.toml names [ledger] only in a comment: with a syntax error elsewhere, the read-only commands
    warn once and read the repository's ledger; the commands that need the configuration name file and line."""
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    config = repo / "docket.toml"
    config.write_text(config.read_text() + "this is = = broken\n")
    line = len(config.read_text().splitlines())
    for command in (["status"], ["log", "--run", "r1"], ["verify"]):
        result = docket(*command, check=False)
        assert result.returncode == 0, result.stderr
        warnings = [w for w in result.stderr.splitlines() if w.startswith("docket: warning: ")]
        assert len(warnings) == 1 and warnings[0].startswith(f"docket: warning: bad-config: docket.toml line {line}:")
    for command in (["config", "show"], ["go", "--task", "x"]):
        code, error, message = error_of(docket(*command, check=False))
        assert (code, error) == (2, "bad-config") and message.startswith(f"docket.toml line {line}:"), message


def test_a_broken_file_with_a_ledger_table_opens_no_ledger_and_says_where(docket, repo):
    docket("init")
    (repo / "docket.toml").write_text('# [ledger] in a comment\n\n[ledger]\nurl = "postgresql://db/x\n')
    code, error, message = error_of(docket("status", check=False))
    assert (code, error) == (2, "bad-config") and message.startswith("docket.toml line 4:"), message
    assert "[ledger] (line 3)" in message
