"""`docket log --json` streams its document: a read that fails midway still leaves one valid JSON document."""

from __future__ import annotations

import json
import sqlite3

import pytest


@pytest.mark.parametrize("run", [None, "r1"])
def test_a_damaged_event_ends_the_log_document_with_the_error(docket, run):
    docket("init")
    for run_id in ("r1", "r2"):
        docket("run", "open", "--target", "main", "--goal", "g", "--id", run_id)
    head = docket("log", "--json").json()["head"]
    damaged = docket("log", "--json", "--run", "r1").json()["events"][-1]["position"]  # before r2's last event
    assert damaged < head
    with sqlite3.connect(docket.ledger) as conn:
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (b'{"payload": [', damaged))
    conn.close()
    listed = docket("log", "--json", *(["--run", run] if run else []), check=False)
    assert listed.returncode == 1
    assert listed.stderr.count("\n") == 1 and listed.stderr.startswith("docket: error: ledger-unverifiable: ")
    doc = json.loads(listed.stdout)  # exactly one document
    assert doc["head"] == head and doc["events"] and all(e["position"] < damaged for e in doc["events"])
    assert doc["error"]["code"] == "ledger-unverifiable" and f"position {damaged}" in doc["error"]["message"]
    assert listed.stderr.strip() == f"docket: error: ledger-unverifiable: {doc['error']['message']}"
    human = docket("log", check=False)
    assert human.returncode == 1 and human.stderr.startswith("docket: error: ledger-unverifiable: ")


def test_log_reads_through_the_port_without_heavy_modules(docket):
    """`docket log` (all, or one run's through the views' index) pays for no pydantic, eventsourcing or sqlite-utils."""
    import subprocess
    import sys

    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("status")  # the views at the head: log --run reads their index as it is
    probe = ("import sys, io, contextlib\n"
             "from docket.cli.app import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    codes = [main(['log', '--json']), main(['log', '--run', 'r1', '--json'])]\n"
             "heavy = {'pydantic', 'eventsourcing', 'dulwich', 'sqlite_utils', 'psutil', 'anyio'}\n"
             "print(codes, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=docket.cwd, env=docket.env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[0, 0] []"


def test_the_tests_own_reading_of_the_ledger_lists_what_docket_log_lists(docket):
    """tests/logged_events.py (how the e2e worlds look at a ledger without a process per look) lists exactly the
    document docket log prints: the same events, fields and values, in the same order."""
    from tests.logged_events import logged_events

    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g ✓ \"quoted\"", "--id", "r1")
    docket("task", "plan", "r1", "--title", "t", "--id", "t1")
    listed = docket("log", "--json").json()["events"]
    assert len(listed) >= 3 and logged_events(docket.ledger) == listed
