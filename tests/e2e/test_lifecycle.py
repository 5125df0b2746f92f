"""A whole run through the real CLI: open, plan, register, lease, relaunch, pause, status, log, replay."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys

import pytest

from ..conftest import git

T = "2026-01-01T00:{:02d}:00.000Z".format


def test_full_lifecycle(docket, repo):
    assert docket("init", "--json", now=T(0)).json()["created"] is True
    assert docket("init", "--json", now=T(0)).json()["created"] is False

    opened = docket("run", "open", "--target", "main", "--goal", "fix the flaky test", "--budget", "1h",
                    "--id", "r1", "--json", now=T(1)).json()
    assert opened["run"]["base_commit"] == git(repo, "rev-parse", "main")
    docket("task", "plan", "r1", "--title", "parser", "--id", "t1", now=T(2))
    docket("worker", "register", "r1", "--role", "implementer", "--task", "t1", "--id", "w1", now=T(2))
    token = docket("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "10m",
                   "--json", now=T(3)).json()["token"]
    docket("lease", "renew", "wt/a", "--token", str(token), "--ttl", "10m", now=T(4))
    refused = docket("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "1m",
                     check=False, now=T(5))
    assert refused.returncode == 3 and "lease-held" in refused.stderr
    relaunched = docket("worker", "relaunch", "w1", "--json", now=T(6)).json()
    assert relaunched["generation"] == 2
    token2 = docket("lease", "grant", "wt/a", "--worker", "w1", "--generation", "2", "--ttl", "10m",
                    "--json", now=T(7)).json()["token"]
    assert token2 > token
    docket("run", "pause", "r1", "--reason", "lunch", now=T(10))

    status = docket("status", "r1", "--json", now=T(40)).json()
    run = status["run"]
    # no docket process supervised this run's work: nothing is billed (tests/unit/test_budget.py bills supervision)
    assert (run["status"], run["used_ms"], run["remaining_ms"]) == ("paused", 0, 60 * 60_000)
    assert [t["task_id"] for t in status["tasks"]] == ["t1"]
    assert status["workers"][0]["generation"] == 2
    assert status["leases"][0]["token"] == token2 and status["leases"][0]["status"] == "held"

    docket("run", "resume", "r1", now=T(50))
    docket("run", "complete", "r1", now=T(55))
    everything = docket("status", "--json", now=T(59)).json()
    assert [(r["run_id"], r["status"], r["used_ms"]) for r in everything["runs"]] == [("r1", "completed", 0)]

    # The past, as the ledger knew it: by position and by time.
    at_grant = docket("status", "r1", "--at", str(token), "--json").json()
    assert at_grant["position"] == token and at_grant["workers"][0]["generation"] == 1
    assert at_grant["run"]["used_ms"] == 0 and at_grant["run"]["status"] == "active"  # as it stood then
    at_time = docket("status", "r1", "--at", T(8), "--json").json()
    assert at_time["run"]["status"] == "active" and at_time["leases"][0]["token"] == token2

    log = docket("log", "--run", "r1", "--json").json()["events"]
    types = [e["type"] for e in log]
    assert types[:3] == ["RunOpened.v2", "RunBasePinRequested.v1", "RunBasePinned.v1"]
    assert {"TaskPlanned.v2", "WorkerRegistered.v1", "LeaseGranted.v1", "LeaseRenewed.v1"} <= set(types)
    grants = docket("log", "--type", "LeaseGranted", "--json").json()["events"]
    assert [e["position"] for e in grants] == [token, token2]
    human = docket("log").stdout.splitlines()
    assert len(human) == docket("verify", "--json").json()["events"]

    replay = docket("replay", "--json").json()
    assert replay["drift"] == [] and replay["rebuilt_position"] == replay["verified"]["head"]["position"]


def test_replay_finds_and_repairs_drifted_projections(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    views = docket.ledger.with_name("views.sqlite")
    with sqlite3.connect(views) as conn:
        conn.execute("UPDATE runs SET status = 'completed' WHERE run_id = 'r1'")
    drifted = docket("replay", check=False)
    assert drifted.returncode == 1 and "projection-drift" in drifted.stderr and "runs" in drifted.stderr
    assert docket("status", "r1", "--json").json()["run"]["status"] == "active"
    assert docket("replay").returncode == 0


def test_replay_until_a_position(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    doc = docket("replay", "--until", "3", "--json").json()
    assert doc["rebuilt_position"] == 3 and doc["tables"]["runs"] == 1 and doc["tables"]["pending_intents"] == 1


def test_ledger_and_views_live_in_the_git_common_dir_shared_by_worktrees(docket, repo, tmp_path):
    docket("init")
    assert docket.ledger.exists() and docket.ledger.with_name("views.sqlite").exists()
    for path in (docket.ledger, docket.ledger.with_name("views.sqlite")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert git(repo, "status", "--porcelain") == "?? docket.toml"  # the commented default config, nothing of the ledger
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature")
    from ..conftest import Docket

    in_worktree = Docket(tmp_path / "wt", docket.env)
    in_worktree("run", "open", "--target", "feature", "--goal", "g", "--id", "r1")
    assert [r["run_id"] for r in docket("status", "--json").json()["runs"]] == ["r1"]


def test_ledger_option_and_environment_override(docket, tmp_path):
    elsewhere = tmp_path / "custom" / "mine.sqlite"
    elsewhere.parent.mkdir()  # init makes no missing folder (bad-ledger-path)
    docket("init", "--ledger", str(elsewhere))
    assert elsewhere.exists() and elsewhere.with_name("mine.views.sqlite").exists()
    env_client = type(docket)(docket.cwd, {**docket.env, "DOCKET_LEDGER": str(elsewhere)})
    env_client("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    assert not docket.ledger.exists()
    assert docket("status", "--ledger", str(elsewhere), "--json").json()["runs"][0]["run_id"] == "r1"


@pytest.mark.slow
def test_four_cli_processes_appending_at_once(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    procs = [subprocess.Popen([sys.executable, "-m", "docket", "task", "plan", "r1", "--title", f"t{i}",
                               "--id", f"t{i}"], cwd=docket.cwd, env=docket.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(6)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    tasks = docket("status", "r1", "--json").json()["tasks"]
    assert sorted(t["task_id"] for t in tasks) == [f"t{i}" for i in range(6)]
    assert docket("verify", "--json").json()["events"] == 1 + 3 + 6


def test_version_module_and_schema(docket):
    assert docket("--version").stdout.startswith("docket ")
    schemas = docket("schema", "--json").json()
    for name in ["LedgerCreated.v1", "WorkerRegistered.v1", "LeaseGranted.v1", "RunBasePinRequested.v1"]:
        assert schemas[name]["additionalProperties"] is False
    assert "payload" not in json.dumps(schemas["LeaseGranted.v1"]["required"])


def test_damaged_views_are_disposable_and_rebuilt_from_the_ledger(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    views = docket.ledger.with_name("views.sqlite")
    for leftover in (views.with_name("views.sqlite-wal"), views.with_name("views.sqlite-shm")):
        leftover.unlink(missing_ok=True)
    views.write_bytes(b"this is not a database" * 100)
    assert docket("status", "r1", "--json").json()["run"]["status"] == "active"
    views.unlink()
    assert docket("status", "--json").json()["runs"][0]["run_id"] == "r1"
    assert views.exists()


def test_status_on_current_views_imports_no_heavy_module(docket):
    """`docket status` runs many times a minute in scripts: it must not pay for pydantic & co."""
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    probe = ("import sys, io, contextlib\n"
             "from docket.cli.app import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    code = main(['status', '--json'])\n"
             "heavy = {'pydantic', 'eventsourcing', 'dulwich', 'sqlite_utils', 'psutil', 'anyio', 'rich'}\n"
             "print(code, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=docket.cwd, env=docket.env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "0 []"


def test_status_says_a_released_lease_is_released_and_an_expired_one_expired(docket):
    docket("init", now=T(0))
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T(1))
    docket("task", "plan", "r1", "--title", "t", "--id", "t1", now=T(1))
    docket("worker", "register", "r1", "--role", "implementer", "--task", "t1", "--id", "w1", now=T(1))
    grant = ("lease", "grant", "--worker", "w1", "--generation", "1", "--ttl", "10m", "--json")
    kept = docket(*grant[:2], "wt/kept", *grant[2:], now=T(2)).json()["token"]
    given = docket(*grant[:2], "wt/given", *grant[2:], now=T(2)).json()["token"]
    lapsed = docket(*grant[:2], "wt/lapsed", *grant[2:], now=T(2)).json()["token"]
    docket("lease", "release", "wt/given", "--token", str(given), now=T(3))
    docket("lease", "expire", "wt/lapsed", now=T(13))

    def lines(now: str) -> dict[str, str]:
        shown = docket("status", "r1", now=now).stdout.splitlines()
        return {line.split(":")[0].split()[-1]: line for line in shown if line.startswith("  lease ")}

    now = lines(T(5))
    assert now["wt/kept"] == f"  lease wt/kept: held by w1 gen 1 token {kept} until 2026-01-01T00:12:00.000Z"
    assert now["wt/given"] == f"  lease wt/given: released at 2026-01-01T00:03:00.000Z by w1 gen 1 token {given}"
    assert now["wt/lapsed"] == (f"  lease wt/lapsed: expired at 2026-01-01T00:12:00.000Z, held by w1 gen 1 token "
                                f"{lapsed}")
    later = lines(T(20))  # past its expiry, with no release recorded: expired, not held
    assert later["wt/kept"] == (f"  lease wt/kept: expired at 2026-01-01T00:12:00.000Z, held by w1 gen 1 token {kept} "
                                "(not released)")
    assert "until" not in later["wt/given"] + now["wt/given"]
