"""The CLI on a PostgreSQL ledger (DOCKET_DATABASE_URL): what a user does on the file works the same on a database,
`docket ledger copy` moves a ledger between the two with the same digests, and a crash at the base pin's named points
is finished by replay as on the file."""

from __future__ import annotations

import signal
import sqlite3
import subprocess

import pytest

from ..conftest import Docket, git
from .test_crash import BASE_PIN_POINTS


@pytest.fixture
def pg_docket(repo, postgres_url) -> Docket:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    return Docket(repo, {**env, "DOCKET_DATABASE_URL": postgres_url})


def _events(docket: Docket, *options: str) -> list[tuple]:
    return [(e["position"], e["stream"], e["type"], e["recorded_at"])
            for e in docket(*options, "log", "--json").json()["events"]]


def test_a_run_recorded_in_postgres_verifies_and_leaves_no_file_ledger(pg_docket, repo):
    pg_docket("init")
    pg_docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    pg_docket("task", "plan", "r1", "--title", "first", "--id", "t1")
    status = pg_docket("status", "r1", "--json").json()
    assert status["run"]["status"] == "active" and status["run"]["base_commit"] == git(repo, "rev-parse", "main")
    verified = pg_docket("verify", "--json").json()
    assert verified["events"] == len(_events(pg_docket)) >= 4
    assert not (repo / ".git" / "docket" / "ledger.sqlite").exists()  # the database is the ledger
    assert list((repo / ".git" / "docket").glob("views.*.sqlite"))  # this machine's views of it


def test_copy_to_postgres_and_back_keeps_every_event_and_digest(docket, repo, postgres_url, tmp_path):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("task", "plan", "r1", "--title", "first", "--id", "t1")
    head = docket("verify", "--json").json()["head"]

    copied = docket("ledger", "copy", "--to", postgres_url, "--json").json()
    assert copied["head"] == head and copied["copied"] == head["position"] and copied["resumed_from"] == 0
    on_database = Docket(repo, {**docket.env, "DOCKET_DATABASE_URL": postgres_url})
    assert on_database("verify", "--json").json()["head"] == head
    assert _events(on_database) == _events(docket)

    back = tmp_path / "back.sqlite"
    on_database("ledger", "copy", "--to", str(back))
    assert docket("--ledger", str(back), "verify", "--json").json()["head"] == head
    assert _events(docket, "--ledger", str(back)) == _events(docket)
    # and the copy is a ledger to go on with: the next event chains on in either store
    on_database("task", "plan", "r1", "--title", "second", "--id", "t2")
    assert on_database("verify", "--json").json()["head"]["position"] == head["position"] + 1


def test_a_copy_into_another_ledger_is_refused_and_leaves_it_as_it_was(docket, repo, postgres_url):
    on_database = Docket(repo, {**docket.env, "DOCKET_DATABASE_URL": postgres_url})
    on_database("init")
    on_database("run", "open", "--target", "main", "--goal", "other", "--id", "r9")
    before = on_database("verify", "--json").json()["head"]
    docket("init")
    refused = docket("ledger", "copy", "--to", postgres_url, check=False)
    assert refused.returncode == 3 and "target-not-empty" in refused.stderr
    assert on_database("verify", "--json").json()["head"] == before


def test_a_copy_killed_in_its_first_batch_leaves_the_target_empty_and_runs_again(docket, repo, postgres_url):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    head = docket("verify", "--json").json()["head"]
    killed = docket("ledger", "copy", "--to", postgres_url, fault="store:before-commit")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    on_database = Docket(repo, {**docket.env, "DOCKET_DATABASE_URL": postgres_url})
    assert on_database("verify", check=False).returncode == 5  # nothing was committed: no ledger there yet
    again = docket("ledger", "copy", "--to", postgres_url, "--json").json()
    assert again["resumed_from"] == 0 and again["head"] == head


def test_a_copy_resumes_after_the_prefix_the_target_already_holds(docket, repo, postgres_url):
    docket("init")
    first = docket("ledger", "copy", "--to", postgres_url, "--json").json()
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    again = docket("ledger", "copy", "--to", postgres_url, "--json").json()
    assert again["resumed_from"] == first["head"]["position"]
    assert again["copied"] == again["head"]["position"] - first["head"]["position"] > 0


def test_a_source_whose_chain_is_broken_is_not_copied(docket, repo, postgres_url):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    with sqlite3.connect(docket.ledger) as conn:
        conn.execute("UPDATE stored_events SET state = CAST(REPLACE(CAST(state AS TEXT), '\"g\"', '\"G\"') AS BLOB) "
                     "WHERE topic LIKE 'RunOpened%'")
    refused = docket("ledger", "copy", "--to", postgres_url, check=False)
    assert refused.returncode == 1 and "chain-broken" in refused.stderr
    on_database = Docket(repo, {**docket.env, "DOCKET_DATABASE_URL": postgres_url})
    assert on_database("verify", check=False).returncode == 5  # nothing copied


@pytest.mark.parametrize("to", ["mysql://db/x", "postgresql://db:port/x", "postgresql://db/",
                                'postgresql://db/x?schema=a"b', "postgresql://db/x\x01y"])
def test_a_bad_url_is_a_clear_error(docket, pg_docket, to):
    docket("init")
    copied = docket("ledger", "copy", "--to", to, check=False)
    assert copied.returncode == 2 and copied.stderr.startswith("docket: error: ")
    used = Docket(pg_docket.cwd, {**pg_docket.env, "DOCKET_DATABASE_URL": to})("status", check=False)
    assert used.returncode == 2 and "bad-database-url" in used.stderr and "Traceback" not in used.stderr


def test_a_password_is_never_shown(docket, postgres_url):
    docket("init")
    secret = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:hunter2@").replace(
        postgres_url.rsplit(":", 1)[1].split("/")[0], "1")  # a port nothing listens on
    failed = Docket(docket.cwd, {**docket.env, "DOCKET_DATABASE_URL": secret})("status", check=False)
    assert failed.returncode == 2 and "hunter2" not in failed.stderr and "***" in failed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("point", BASE_PIN_POINTS)
def test_crash_then_replay_on_postgres_leaves_exactly_one_outcome(pg_docket, repo, point):
    pg_docket("init")
    crashed = pg_docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", fault=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    replay = pg_docket("replay", "--apply", "--json", check=False)
    assert replay.returncode in (0, 1), replay.stderr
    assert pg_docket("replay", "--apply").returncode == 0
    assert pg_docket("verify").returncode == 0
    outcomes = [e for e in pg_docket("log", "--json").json()["events"] if e["type"].startswith("RunBasePin")]
    if point == "store:before-commit":
        assert outcomes == [] and pg_docket("status", "r1", check=False).returncode == 5
        return
    assert [e["type"] for e in outcomes] == ["RunBasePinRequested.v1", "RunBasePinned.v1"]
    assert pg_docket("status", "r1", "--json").json()["run"]["base_commit"] == git(repo, "rev-parse", "main")


def test_docket_go_on_postgres_delivers_and_its_receipt_verifies_offline(tmp_path, postgres_url):
    """The whole supervisor on a PostgreSQL ledger: three tasks, a dependency and a repair cycle delivered, the
    receipt exported and verified offline (no database), replay finding nothing to redo, no file ledger written."""
    import json
    from pathlib import Path

    from tests.e2e.go_world import DELIVERED, make_go_world

    world = make_go_world(tmp_path)  # its `docket init` made the file ledger: it must stay as it is
    world.env["DOCKET_DATABASE_URL"] = postgres_url
    assert world.run("init").returncode == 0
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    done = world.go("r1", "--parallel", "3", "--key", f"{keys}.key")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "delivered"
    assert {row["task"]: row["cycles"] for row in summary["tasks"]} == {"greet": 1, "name": 2, "shout": 1}
    for path, text in DELIVERED.items():
        assert world.file_at("main", path) == text
    offline = {k: v for k, v in world.env.items() if k != "DOCKET_DATABASE_URL"}
    verified = subprocess.run(world.argv("verify-receipt", summary["receipt"]["path"], "--key", f"{keys}.pub"),
                              cwd=tmp_path, env=offline, capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stderr
    replay = json.loads(world.run("replay", "--json").stdout)
    assert replay["drift"] == [] and replay["verified"]["ok"] is True
    with sqlite3.connect(world.ledger) as file_ledger:  # nothing went to the file: its genesis alone
        assert file_ledger.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0] == 1
    assert Path(summary["receipt"]["path"]).exists()


def test_docket_toml_names_the_database_and_every_command_uses_it(repo, postgres_url):
    """[ledger] url in docket.toml: init, status and the commands that read docket.toml itself (go, check) all take
    it (an unknown section would be refused by those), and a password in it is refused, the file being committed."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    docket = Docket(repo, env)
    (repo / "docket.toml").write_text(f'[ledger]\nurl = "{postgres_url}"\n\n[checks.ok]\ncommand = ["true"]\n')
    git(repo, "add", "docket.toml")
    git(repo, "commit", "-q", "-m", "ledger in postgres")
    assert "postgresql://" in docket("init", "--json").json()["ledger"]
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    assert Docket(repo, {**env, "DOCKET_DATABASE_URL": postgres_url})("status", "r1", "--json").json()["run"][
        "status"] == "active"  # the same database
    assert not (repo / ".git" / "docket" / "ledger.sqlite").exists()
    shown = docket("config", "show", "--json", check=False)
    assert shown.returncode == 0, shown.stderr
    with_password = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:hunter2@")
    (repo / "docket.toml").write_text(f'[ledger]\nurl = "{with_password}"\n')
    refused = docket("status", check=False)
    assert refused.returncode == 2 and "bad-config" in refused.stderr and "hunter2" not in refused.stderr


def test_a_docket_toml_naming_a_ledger_that_cannot_be_read_opens_no_ledger(repo):
    """A broken docket.toml that has a [ledger] section: which ledger is meant is unknown, so not even `docket init`
    falls back to the file in the repository."""
    import os

    docket = Docket(repo, {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")})
    (repo / "docket.toml").write_text('[ledger]\nurl = "postgresql://db/x\n')  # an unterminated string
    refused = docket("init", check=False)
    assert refused.returncode == 2 and "bad-config" in refused.stderr
    assert not (repo / ".git" / "docket" / "ledger.sqlite").exists()
