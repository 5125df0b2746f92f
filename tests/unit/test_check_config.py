"""[checks.NAME] and artifact_dir in docket.toml: strict rules, the exact argv, and the digest a result is bound to."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

from docket.adapters.world.files.config_file import load_config
from docket.domain.kernel.canonical import canonical_json
from docket.domain.config import CheckConfig, Config, check_artifact_dir, check_config_sha256

TESTS = '[checks.tests]\ncommand = ["pytest", "-q"]\n'


def parsed(text: str) -> Config:
    return Config.model_validate(tomllib.loads(text))


def check(text: str, name: str = "tests") -> CheckConfig:
    return parsed(text).checks[name]


def refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "docket.toml"
    path.write_text(text)
    with pytest.raises(Exception) as caught:
        load_config(path)
    assert getattr(caught.value, "code", None) == "bad-config", caught.value
    return caught.value.message


# Settings ---------------------------------------------------------------------


def test_a_check_has_safe_defaults():
    tests = check(TESTS)
    assert tests.command == ["pytest", "-q"] and tests.shell is False and tests.required is True
    assert (tests.timeout_ms, tests.idle_timeout_ms, tests.env, tests.env_allow) == (600_000, None, {}, [])


def test_a_full_check():
    tests = check(TESTS + 'shell = false\ntimeout = "1h30m"\nidle_timeout = "90s"\nrequired = false\n'
                  'env = { REPORT = "{worktree}/out/junit.xml", CI = "1" }\nenv_allow = ["HOME", "LC_*"]\n')
    assert (tests.timeout_ms, tests.idle_timeout_ms, tests.required) == (5_400_000, 90_000, False)
    assert tests.env == {"REPORT": "{worktree}/out/junit.xml", "CI": "1"} and tests.env_allow == ["HOME", "LC_*"]


def test_argv_runs_the_command_itself_with_worktree_filled_in():
    tests = check('[checks.tests]\ncommand = ["pytest", "--junitxml={worktree}/out/j.xml", "-k", "{{x}}"]\n')
    assert tests.argv("/repo/.git/docket/executions/r/b/tests-1") == (
        "pytest", "--junitxml=/repo/.git/docket/executions/r/b/tests-1/out/j.xml", "-k", "{x}")


def test_with_shell_argv_runs_the_one_script_with_sh_taken_literally():
    script = 'ruff check . && echo "${HOME}" {} {worktree} {{'
    lint = check(f"[checks.lint]\ncommand = ['{script}']\nshell = true\n", "lint")
    assert lint.argv("/e") == ("/bin/sh", "-c", script)


def test_environment_fills_in_worktree():
    tests = check(TESTS + 'env = { REPORT = "{worktree}/out", CI = "1" }\n')
    assert tests.environment("/e") == {"REPORT": "/e/out", "CI": "1"}


def test_required_checks_are_the_required_names_sorted():
    config = parsed('[checks.zeta]\ncommand = ["z"]\n[checks.alpha]\ncommand = ["a"]\n'
                    '[checks.lint]\ncommand = ["l"]\nrequired = false\n')
    assert config.required_checks() == ["alpha", "zeta"]
    assert Config().checks == {} and Config().required_checks() == []


# Refusals, each naming the key and its line ------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    (TESTS + 'colour = "red"\n', "line 3: checks.tests.colour: unknown key"),
    ('[checks]\ntests = { command = ["x"], retries = 2 }\n', "line 2: checks.tests.retries: unknown key"),
    ('[checks.tests]\nshell = true\n', "line 1: checks.tests.command: missing"),
    ('[checks.tests]\ncommand = []\n', "line 2: checks.tests.command: must not be empty"),
    ('[checks.tests]\ncommand = ["  "]\n', "line 2: checks.tests.command: command[0] is blank"),
    ('[checks.tests]\ncommand = "pytest"\n', "line 2: checks.tests.command: Input should be a valid list"),
    ('[checks.lint]\ncommand = ["ruff", "check"]\nshell = true\n',
     "line 2: checks.lint.command: shell = true runs one script with /bin/sh -c, so command must be exactly one "
     "string (the script), not 2"),
    (TESTS + 'shell = "yes"\n', "line 3: checks.tests.shell: Input should be a valid boolean"),
    (TESTS + 'required = "no"\n', "line 3: checks.tests.required: Input should be a valid boolean"),
    ('[checks.tests]\ncommand = [\n  "pytest",\n  "{prompt}",\n]\n',
     "line 4: checks.tests.command[1]: unknown placeholder {prompt} in '{prompt}' (known here: {worktree})"),
    ('[checks.tests]\ncommand = ["pytest", "{worktree"]\n', "line 2: checks.tests.command[1]: '{worktree' has a lone"),
    ('[checks.tests]\ncommand = ["pytest", "a\\u0000b"]\n', "line 2: checks.tests.command[1]: String should match"),
    (TESTS + 'env = { P = "{port}" }\n', "line 3: checks.tests.env.P: unknown placeholder {port}"),
    (TESTS + 'env = { "A-B" = "1" }\n', "line 3: checks.tests.env.A-B: 'A-B' is not an environment variable name"),
    (TESTS + 'env_allow = ["HOME", "A-B"]\n', "line 3: checks.tests.env_allow[1]: String should match"),
    ('[checks."my tests"]\ncommand = ["x"]\n', "line 1: checks.\"my tests\": 'my tests' is not a valid name"),
    ('[[checks]]\ncommand = ["x"]\n', "line 1: checks: must be a table"),
    # durations
    (TESTS + 'timeout = "10 minutes"\n', "line 3: checks.tests.timeout: '10 minutes' is not a duration"),
    (TESTS + 'timeout = 600\n', 'line 3: checks.tests.timeout: a duration is a string like "45m"'),
    (TESTS + 'timeout = "0s"\n', "line 3: checks.tests.timeout: '0s' must be longer than zero"),
    (TESTS + 'idle_timeout = "-5m"\n', "line 3: checks.tests.idle_timeout: '-5m' is not a duration"),
    (TESTS + 'idle_timeout = ""\n', "line 3: checks.tests.idle_timeout:"),
    # the artifact directory
    ('artifact_dir = "../x"\n', "line 1: artifact_dir: '../x' contains '..'"),
    ('artifact_dir = "a/../b"\n', "line 1: artifact_dir: 'a/../b' contains '..'"),
    ('artifact_dir = "out/.."\n', "line 1: artifact_dir: 'out/..' contains '..'"),
    ('artifact_dir = "/abs"\n', "line 1: artifact_dir: '/abs' is absolute"),
    ('artifact_dir = ".git"\n', "line 1: artifact_dir: '.git' is inside git's own folder"),
    ('artifact_dir = ".git/x"\n', "line 1: artifact_dir: '.git/x' is inside git's own folder"),
    ('artifact_dir = "./.GIT/hooks"\n', "line 1: artifact_dir: './.GIT/hooks' is inside git's own folder"),
    ('artifact_dir = "vendor/lib/.git"\n', "line 1: artifact_dir: 'vendor/lib/.git' is inside git's own folder"),
    ('artifact_dir = ""\n', "line 1: artifact_dir: '' is the repository root"),
    ('artifact_dir = "./"\n', "line 1: artifact_dir: './' is the repository root"),
    ('artifact_dir = "a\\u0000b"\n', "line 1: artifact_dir: 'a\\x00b' contains NUL"),
    ('artifact_dir = "out\\nx"\n', "line 1: artifact_dir: 'out\\nx' contains NUL or another control"),
    ('artifact_dir = 5\n', "line 1: artifact_dir: Input should be a valid string"),
    ('[run]\nartifact_dir = "out"\n', "line 2: run.artifact_dir: unknown key"),
])
def test_each_problem_names_the_key_and_its_line(tmp_path, text, expected):
    message = refused(tmp_path, text)
    assert message.startswith("docket.toml line "), message
    assert expected in message, message


def test_a_bad_shell_value_is_the_one_problem_reported(tmp_path):
    message = refused(tmp_path, '[checks.lint]\ncommand = ["a {x}", "b"]\nshell = "yes"\n')
    assert message == "docket.toml line 3: checks.lint.shell: Input should be a valid boolean"


@pytest.mark.parametrize(("given", "normal"), [
    ("out", "out"), ("out/", "out"), ("./out//reports/", "out/reports"), ("out/./x", "out/x"),
    (".github/out", ".github/out"), ("..hidden", "..hidden"), ("x.git", "x.git"), ("a b/c", "a b/c"),
])
def test_the_artifact_directory_has_one_spelling(given, normal):
    assert check_artifact_dir(given) == normal
    assert parsed(f"artifact_dir = {given!r}\n".replace("'", '"')).artifact_dir == normal


def test_no_artifact_directory_by_default():
    assert Config().artifact_dir is None


# The configuration digest -----------------------------------------------------


FULL = ('[checks.tests]\ncommand = ["pytest", "-q"]\ntimeout = "1h"\nidle_timeout = "5m"\nrequired = true\n'
        'env = { CI = "1", REPORT = "{worktree}/out" }\nenv_allow = ["HOME", "LC_*"]\n')


def test_the_digest_is_sha256_of_the_canonical_settings():
    document = {"name": "tests", "command": ["pytest", "-q"], "shell": False, "timeout_ms": 3_600_000,
                "idle_timeout_ms": 300_000, "required": True, "env": {"CI": "1", "REPORT": "{worktree}/out"},
                "env_allow": ["HOME", "LC_*"]}
    assert check_config_sha256("tests", check(FULL)) == hashlib.sha256(canonical_json(document)).hexdigest()


def test_the_digest_ignores_spelling():
    same = ('[checks]\ntests.env_allow = ["LC_*", "HOME"]\ntests.env = { REPORT = "{worktree}/out", CI = "1" }\n'
            'tests.idle_timeout = "300s"\ntests.timeout = "60m"\ntests.command = [\'pytest\', """-q"""]\n')
    assert check_config_sha256("tests", check(same)) == check_config_sha256("tests", check(FULL))


@pytest.mark.parametrize("change", [
    ('command = ["pytest", "-q"]', 'command = ["pytest", "-x"]'),
    ('command = ["pytest", "-q"]', 'command = ["pytest", "-q", "-q"]'),
    ('command = ["pytest", "-q"]', 'command = ["pytest -q"]\nshell = true'),
    ('timeout = "1h"', 'timeout = "61m"'),
    ('idle_timeout = "5m"', 'idle_timeout = "6m"'),
    ('idle_timeout = "5m"\n', ''),
    ('required = true', 'required = false'),
    ('CI = "1"', 'CI = "0"'),
    ('CI = "1"', 'CJ = "1"'),
    ('CI = "1", ', ''),
    ('["HOME", "LC_*"]', '["HOME"]'),
    ('["HOME", "LC_*"]', '["HOME", "LC_?"]'),
])
def test_the_digest_changes_with_each_setting(change):
    old, new = change
    assert old in FULL
    assert check_config_sha256("tests", check(FULL.replace(old, new))) != check_config_sha256("tests", check(FULL))


def test_the_digest_changes_with_the_name():
    tests = check(FULL)
    assert check_config_sha256("tests", tests) != check_config_sha256("unit", tests)


def test_the_same_string_with_and_without_shell_runs_differently_and_digests_differently():
    argv = check('[checks.t]\ncommand = ["make"]\n', "t")
    script = check('[checks.t]\ncommand = ["make"]\nshell = true\n', "t")
    assert argv.argv("/e") == ("make",) and script.argv("/e") == ("/bin/sh", "-c", "make")
    assert check_config_sha256("t", argv) != check_config_sha256("t", script)


# A JUnit report and the judgment relative to the base ----------------------------


def test_junit_and_judge_are_read_and_a_relative_judgment_needs_a_report(tmp_path: Path):
    tests = check(TESTS + 'junit = "out/junit.xml"\njudge = "relative-to-base"\n')
    assert (tests.junit, tests.judge) == ("out/junit.xml", "relative-to-base")
    assert check(TESTS).judge == "exit" and check(TESTS).junit is None
    assert "junit" in refused(tmp_path, TESTS + 'judge = "relative-to-base"\n')
    assert "judge" in refused(tmp_path, TESTS + 'junit = "j.xml"\njudge = "by-feel"\n')
    for bad in ("/abs/junit.xml", "../junit.xml", ".git/junit.xml"):
        assert "junit" in refused(tmp_path, TESTS + f'junit = "{bad}"\n')


def test_the_digest_of_a_check_without_the_new_keys_is_what_it_was_and_each_key_changes_it():
    plain = check_config_sha256("tests", check(TESTS))
    document = {"name": "tests", "command": ["pytest", "-q"], "shell": False, "timeout_ms": 600_000,
                "idle_timeout_ms": None, "required": True, "env": {}, "env_allow": []}
    assert plain == hashlib.sha256(canonical_json(document)).hexdigest()  # results recorded before still count
    with_report = check_config_sha256("tests", check(TESTS + 'junit = "j.xml"\n'))
    relative = check_config_sha256("tests", check(TESTS + 'junit = "j.xml"\njudge = "relative-to-base"\n'))
    assert len({plain, with_report, relative}) == 3
