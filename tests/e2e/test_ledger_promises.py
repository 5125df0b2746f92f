"""The ledger's promises under faults, through the real CLI (issue 5, items 3-6, 12 and 13).

Each test reproduces a failure found when the ledger was tried as an unlucky
operator would: an intent stuck at "unknown" holding every other back, a
tracking row that silently stopped all effects, a recorded command reported as
failed when its views could not be written, a clock that lied, a ledger copied
into another repository, and a busy ledger reported as a usage error.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path


from ..conftest import T0, Docket, git

ERROR = "docket: error: "
WARNING = "docket: warning: "


def events_of(docket: Docket, type_: str) -> list[dict]:
    return [e for e in docket("log", "--json", now=None).json()["events"] if e["type"] == type_]


def later(minutes: int) -> str:
    return f"2026-01-01T00:{minutes:02d}:00.000Z"


# 3. One unknown holds no other intent back, is not re-recorded on every pass, and abort cancels --------


def test_an_unknown_intent_holds_no_other_back_and_is_not_recorded_on_every_pass(docket, repo):
    docket("init", now=T0)
    (repo / ".git" / "refs" / "heads" / "ghost").write_text("0123456789abcdef0123456789abcdef01234567\n")
    stuck = docket("run", "open", "--target", "ghost", "--goal", "g", "--id", "stuck", check=False, now=T0)
    assert stuck.returncode == 4  # the branch names an object the repository does not have: unknown
    for i in range(5):  # every later command goes through, and none records the stuck intent again
        docket("run", "open", "--target", "main", "--goal", "g", "--id", f"r{i}", now=T0)
        docket("replay", "--apply", check=False, now=T0)
    assert len(events_of(docket, "IntentOutcomeUnknown.v2")) == 1
    assert len(events_of(docket, "RunBasePinned.v1")) == 5
    status = docket("status", "--json", now=T0).json()
    assert [i["intent_id"] for i in status["pending_intents"]] == [events_of(docket, "RunBasePinRequested.v1")[0]
                                                                   ["payload"]["intent_id"]]
    # once the back-off has run out, the same observation is recorded again, counted
    docket("replay", "--apply", check=False, now="2026-01-01T00:00:01.000Z")
    counts = [e["payload"]["observations"] for e in events_of(docket, "IntentOutcomeUnknown.v2")]
    assert counts == [1, 2]


def test_aborting_a_run_cancels_its_pending_intents_with_a_recorded_outcome(docket):
    docket("init", now=T0)
    opened = docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", "--no-wait", "--json", now=T0)
    intent_id = opened.json()["intent"]["intent_id"]
    aborted = docket("run", "abort", "r1", "--reason", "wrong goal", "--json", now=T0).json()
    assert aborted["cancelled_intents"] == [intent_id]
    (cancel,) = events_of(docket, "IntentCancelled.v1")
    assert cancel["payload"]["intent_id"] == intent_id and cancel["stream"] == "run:r1"
    replay = docket("replay", "--apply", "--json", now=T0).json()
    assert replay["applied"] == [] and replay["pending"] == []
    assert docket("status", "--json", now=T0).json()["pending_intents"] == []
    assert events_of(docket, "RunBasePinned.v1") == []  # nothing was done for the cancelled intent


# 4. What is pending follows from the chain alone ------------------------------------------------------


def test_a_tracking_row_moved_by_a_trigger_stops_no_effect_and_is_reported(docket):
    docket("init", now=T0)
    conn = sqlite3.connect(docket.ledger)
    with conn:  # the attack: a trigger that pushes the effector's tracking row far past every intent
        conn.execute("CREATE TRIGGER skip_all AFTER INSERT ON tracking WHEN NEW.notification_id < 1000000 BEGIN "
                     "UPDATE tracking SET notification_id = 1000000 WHERE application_name = NEW.application_name; "
                     "END")
    conn.close()
    opened = docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    assert "opened on main" in opened.stdout  # its own intent is found by position, not by the cursor
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r2", "--no-wait", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r3", "--no-wait", now=T0)
    for command in (("verify",), ("replay", "--apply")):  # neither reports success over the trigger
        result = docket(*command, check=False, now=T0)
        assert result.returncode == 1 and "skip_all" in result.stderr, result.stderr
    conn = sqlite3.connect(docket.ledger)
    with conn:
        conn.execute("DROP TRIGGER skip_all")  # the operator removes it; the cursor it moved is still wrong
    conn.close()
    result = docket("replay", "--apply", "--json", check=False, now=T0)
    assert result.returncode == 1 and "effector-cursor-drift" in result.stderr, result.stderr
    report = result.json()
    assert report["cursor_repaired"]["was"] == 1000000
    assert {r["outcome"] for r in report["applied"]} == {"RunBasePinned.v1"} and len(report["applied"]) == 2
    assert report["pending"] == []
    assert {r["status"] for r in docket("status", "--json", now=T0).json()["runs"]} == {"active"}
    assert docket("replay", "--apply", now=T0).returncode == 0


def test_replay_apply_names_the_intents_still_pending(docket, repo):
    docket("init", now=T0)
    (repo / ".git" / "refs" / "heads" / "ghost").write_text("0123456789abcdef0123456789abcdef01234567\n")
    docket("run", "open", "--target", "ghost", "--goal", "g", "--id", "stuck", "--no-wait", now=T0)
    result = docket("replay", "--apply", check=False, now=T0)
    assert result.returncode == 4
    assert result.stderr.startswith(ERROR + "intents-pending: 1 intent(s) still pending: intent-")
    assert "missing object" in result.stderr


# 5. A command that recorded its event reports success -------------------------------------------------


def _hold_lock(path: Path, ready, release, mode: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"BEGIN {mode}")
    ready.set()
    release.wait(120)
    conn.execute("ROLLBACK")
    conn.close()


class Locked:
    """Another process holds a lock on an SQLite file until the block ends."""

    def __init__(self, path: Path, mode: str = "EXCLUSIVE"):
        ctx = multiprocessing.get_context("spawn")
        self.ready, self.release = ctx.Event(), ctx.Event()
        self.proc = ctx.Process(target=_hold_lock, args=(path, self.ready, self.release, mode))

    def __enter__(self) -> Locked:
        self.proc.start()
        assert self.ready.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.proc.join(60)


def test_locked_views_do_not_fail_a_recorded_command(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    docket.env["DOCKET_LOCK_TIMEOUT"] = "1"
    with Locked(docket.ledger.with_name("views.sqlite")):
        planned = docket("task", "plan", "r1", "--title", "t", "--id", "t1", "--json", check=False, now=T0)
        assert planned.returncode == 0, planned.stderr  # recorded: success, so nobody retries and records it twice
        assert planned.json()["task_id"] == "t1"
        warning, = planned.stderr.splitlines()
        assert warning.startswith(WARNING + "views-")
        shown = docket("status", "r1", "--json", check=False, now=T0)  # status falls back to the ledger itself
        assert shown.returncode == 0 and [t["task_id"] for t in shown.json()["tasks"]] == ["t1"]
    assert len(events_of(docket, "TaskPlanned.v2")) == 1
    assert [t["task_id"] for t in docket("status", "r1", "--json", now=T0).json()["tasks"]] == ["t1"]


def test_a_full_disk_after_the_commit_is_a_warning_that_names_the_real_error(docket, tmpfs):
    ledger = tmpfs / "ledger.sqlite"
    docket("init", "--ledger", str(ledger), now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", "--ledger", str(ledger), now=T0)
    for views in tmpfs.glob("views.sqlite*"):
        views.unlink()  # disposable: the next command must write them anew
    stat = os.statvfs(tmpfs)
    (tmpfs / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 96 * 1024))  # room for the ledger only
    planned = docket("task", "plan", "r1", "--title", "t", "--id", "t1", "--ledger", str(ledger), check=False, now=T0)
    assert planned.returncode == 0, planned.stderr
    assert "full" in planned.stderr and "cannot rollback" not in planned.stderr
    assert all(line.startswith(WARNING) for line in planned.stderr.splitlines())
    (tmpfs / "filler").unlink()
    shown = docket("status", "r1", "--json", "--ledger", str(ledger), now=T0)
    assert [t["task_id"] for t in shown.json()["tasks"]] == ["t1"] and shown.stderr == ""
    assert docket("verify", "--ledger", str(ledger)).returncode == 0


# 6. Ledger time runs forward; DOCKET_NOW only where it is switched on ---------------------------------


def test_recorded_time_never_goes_backwards(docket):
    docket("init", now="2030-01-01T00:00:00Z")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now="1999-01-01T00:00:00Z")
    times = [e["recorded_at"] for e in docket("log", "--json").json()["events"]]
    assert times == sorted(times) and set(times) == {"2030-01-01T00:00:00.000Z"}
    assert docket("verify").returncode == 0


def test_docket_now_is_ignored_unless_tests_switch_it_on(docket):
    env = {**docket.env, "DOCKET_NOW": "2099-01-01T00:00:00Z"}
    stray = Docket(docket.cwd, env)
    result = stray("init")
    assert result.stderr.startswith(WARNING + "clock-ignored: DOCKET_NOW is honoured only with DOCKET_TESTING=1")
    (created,) = docket("log", "--json").json()["events"]
    assert not created["recorded_at"].startswith("2099")


# 12. A ledger belongs to its repository ---------------------------------------------------------------


def test_a_ledger_copied_into_another_repository_is_refused_there(docket, repo, tmp_path):
    docket("init")
    doc = docket("init", "--json").json()
    assert doc["repository_id"] == (repo / ".git" / "docket" / "repository-id").read_text().strip()
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "x")
    there = Docket(other, docket.env)
    there("init")
    shutil.copy(docket.ledger, there.ledger)  # someone copies A's ledger over B's
    head = len(there("log", "--json").json()["events"])
    for command in (("run", "open", "--target", "main", "--goal", "g"), ("replay", "--apply"), ("init",)):
        result = there(*command, check=False)
        assert result.returncode == 3, result.stderr
        assert result.stderr.startswith(ERROR + "foreign-ledger: this ledger belongs to repository repo-")
    assert len(there("log", "--json").json()["events"]) == head  # nothing recorded against the wrong repository
    verified = there("verify", check=False)
    assert verified.returncode == 0  # an auditor may still verify and read a copy, told whose it is
    assert "docket: warning: foreign-ledger: this ledger belongs to repository repo-" in verified.stderr


def test_concurrent_inits_bind_the_ledger_to_one_identity(docket, repo):
    procs = [subprocess.Popen([sys.executable, "-m", "docket", "init", "--json"], cwd=repo, env=docket.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        docs.append(json.loads(out))
    assert sum(d["created"] for d in docs) == 1
    assert len({d["repository_id"] for d in docs}) == 1
    assert docs[0]["repository_id"] == (repo / ".git" / "docket" / "repository-id").read_text().strip()


# 13. A busy ledger is a conflict naming the lock ------------------------------------------------------


def test_a_busy_ledger_is_a_conflict_that_names_the_lock(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    docket.env["DOCKET_LOCK_TIMEOUT"] = "1"
    with Locked(docket.ledger, mode="IMMEDIATE"):
        result = docket("task", "plan", "r1", "--title", "t", check=False, now=T0)
        assert result.returncode == 3, result.stderr
        assert result.stderr.startswith(ERROR + "ledger-busy: another process holds the ledger's write lock")
        assert str(docket.ledger) in result.stderr and len(result.stderr.splitlines()) == 1
        assert docket("status", "r1", check=False, now=T0).returncode == 0  # readers are not held up
    assert events_of(docket, "TaskPlanned.v2") == []
    docket.env["DOCKET_LOCK_TIMEOUT"] = "soon"
    result = docket("task", "plan", "r1", "--title", "t", check=False, now=T0)
    assert result.returncode == 2 and "DOCKET_LOCK_TIMEOUT" in result.stderr
