"""What a new user meets first: names of errors, --version, --help, the generation they typed."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from docket import __version__

from ..conftest import T0

ERROR_LINE = re.compile(r"docket: error: ([a-z][a-z0-9-]*): (.+)\n")


def error_of(result) -> tuple[int, str, str]:
    match = ERROR_LINE.fullmatch(result.stderr)
    assert match, result.stderr
    return result.returncode, match.group(1), match.group(2)


def test_log_of_an_unknown_run_is_not_found_as_status_says(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    assert docket("log", "--run", "r1", "--json").json()["events"]
    for args in (("status", "r-nope"), ("log", "--run", "r-nope")):
        result = docket(*args, check=False)
        assert result.stdout == ""
        code, name, message = error_of(result)
        assert (code, name) == (5, "run-not-found") and "r-nope" in message, args


def test_a_generation_the_worker_never_had_is_unknown_not_fenced(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    docket("worker", "register", "r1", "--role", "implementer", "--id", "w1", now=T0)
    grant = ("lease", "grant", "wt/a", "--worker", "w1", "--ttl", "10m")
    code, name, message = error_of(docket(*grant, "--generation", "2", check=False, now=T0))
    assert (code, name) == (3, "unknown-generation")
    assert message == "worker w1 has no generation 2; its current generation is 1"
    docket("worker", "relaunch", "w1", now=T0)
    code, name, message = error_of(docket(*grant, "--generation", "1", check=False, now=T0))
    assert (code, name) == (3, "stale-generation") and "fenced" in message


def _docket(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "docket", *args], capture_output=True, text=True, timeout=60)


def test_version_is_text_or_one_json_document():
    assert _docket("--version").stdout == f"docket {__version__}\n"
    for args in (("--version", "--json"), ("--json", "--version")):
        result = _docket(*args)
        assert result.returncode == 0 and result.stderr == ""
        assert json.loads(result.stdout) == {"version": __version__}


def test_help_lists_every_exit_code_and_the_environment():
    text = _docket("--help").stdout
    for code in ("0", "1", "2", "3", "4", "5", "70", "130"):
        assert re.search(rf"^\s+{code}\s+\S", text, re.MULTILINE), code
    assert re.search(r"^\s+130\s+interrupted", text, re.MULTILINE)
    for variable in ("DOCKET_LEDGER", "DOCKET_NOW", "DOCKET_TESTING=1", "DOCKET_FAULT", "DOCKET_LOCK_TIMEOUT"):
        assert variable in text, variable
    assert "DOCKET_DATABASE_URL" in text  # the ledger in PostgreSQL (issue 23)


def test_key_generate_makes_dockets_own_folder_0700_and_no_other(docket, tmp_path):
    """The quick start's `docket key generate --out ~/.docket/signing` works on a machine without ~/.docket."""
    import stat

    home = tmp_path / "home"
    home.mkdir()
    docket.env["HOME"] = str(home)
    made = docket("key", "generate", "--out", str(home / ".docket" / "signing"), "--json").json()
    assert stat.S_IMODE((home / ".docket").stat().st_mode) == 0o700
    assert made["private_key"] == str(home / ".docket" / "signing.key")
    code, name, message = error_of(docket("key", "generate", "--out", str(tmp_path / "nowhere" / "deeper" / "k"),
                                          check=False))
    assert (code, name) == (2, "bad-key-path") and "does not exist" in message
    assert not (tmp_path / "nowhere").exists()


def test_key_generate_as_the_readme_types_it_makes_the_missing_keys_folder_0700(docket, repo):
    """`docket key generate --out keys/docket` (README, "Signing keys") in a repository without keys/: the folder
    is made, 0700, as docket's own ~/.docket is."""
    import stat

    made = docket("key", "generate", "--out", "keys/docket", "--json").json()
    assert (repo / made["private_key"]).resolve() == (repo / "keys" / "docket.key").resolve()
    assert stat.S_IMODE((repo / "keys").stat().st_mode) == 0o700
    assert stat.S_IMODE((repo / "keys" / "docket.key").stat().st_mode) == 0o600
    assert (repo / "keys" / "docket.pub").is_file()


def test_a_bare_worker_id_is_accepted_where_one_run_alone_has_it(docket):
    """Under docket go a worker's id is <run>.<task>: the task's own id finds it, unless two runs have it."""
    docket("init", now=T0)
    for run in ("r1", "r2"):
        docket("run", "open", "--target", "main", "--goal", "g", "--id", run, now=T0)
    docket("worker", "register", "r1", "--role", "implementer", "--id", "r1.solo", now=T0)
    assert docket("worker", "relaunch", "solo", "--json", now=T0).json()["generation"] == 2
    for run in ("r1", "r2"):
        docket("worker", "register", run, "--role", "implementer", "--id", f"{run}.both", now=T0)
    code, name, message = error_of(docket("worker", "relaunch", "both", check=False, now=T0))
    assert (code, name) == (2, "ambiguous-id") and "r1.both" in message and "r2.both" in message
    assert docket("worker", "relaunch", "r2.both", "--json", now=T0).json()["generation"] == 2
