"""Anchors and damage are judged strictly (issue 5, item 11).

Invalid anchors are bad input; a forged genesis event fails verification even
when every digest after it was recomputed; missing tables are named; `log`
does not print an unverifiable ledger; and views, which remember the head they
last saw, catch a ledger that was cut or rewritten.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from docket.domain.kernel.chain import GENESIS_DIGEST, chain_entry, next_digest

from ..conftest import T0


def docket_lines(stderr: str) -> list[str]:
    """docket's own lines on stderr (other libraries' warnings aside)."""
    return [line for line in stderr.splitlines() if line.startswith("docket:")]


def fails(result, code: str, exit_code: int, *mentions: str) -> str:
    assert result.returncode == exit_code, result.stderr
    lines = docket_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"docket: error: {code}: "), result.stderr
    for word in mentions:
        assert word in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def ledger(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    for i in range(3):
        docket("task", "plan", "r1", "--title", f"task {i}", "--id", f"t{i}", now=T0)
    head = docket("verify", "--json").json()["head"]
    assert head["position"] >= 5
    return docket.ledger


def rechain_from(conn: sqlite3.Connection, start: int) -> None:
    """What a careful forger does after changing an event: recompute every digest from start on."""
    previous = GENESIS_DIGEST if start == 1 else conn.execute(
        "SELECT digest FROM chain WHERE position = ?", (start - 1,)).fetchone()[0]
    rows = conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                        "WHERE rowid >= ? ORDER BY rowid", (start,)).fetchall()
    for position, stream, version, type_, state in rows:
        previous = next_digest(previous, chain_entry(position, stream, version, type_, state))
        conn.execute("UPDATE chain SET digest = ? WHERE position = ?", (previous, position))


# Anchors -------------------------------------------------------------------

BAD_ANCHORS = {
    "position-zero": {"position": 0},
    "position-negative": {"position": -3},
    "position-true": {"position": True},
    "position-false": {"position": False},
    "position-float": {"position": 2.0},
    "position-huge": {"position": 2**63},
    "digest-not-hex": {"digest": "z" * 64},
    "digest-short": {"digest": "ab" * 16},
    "digest-uppercase": {"digest": "AB" * 32},
    "digest-empty": {"digest": ""},
}


@pytest.mark.parametrize("under_head", [False, True], ids=["top", "head"])
@pytest.mark.parametrize("change", BAD_ANCHORS.values(), ids=BAD_ANCHORS.keys())
def test_an_invalid_anchor_is_bad_input(docket, ledger, tmp_path, change, under_head):
    head = docket("verify", "--json").json()["head"]
    anchor = {**head, **change}
    path = tmp_path / "anchor.json"
    path.write_text(json.dumps({"head": anchor} if under_head else anchor))
    fails(docket("verify", "--anchor", str(path), check=False), "bad-anchor", 2)


def test_a_valid_anchor_still_verifies(docket, ledger, tmp_path):
    path = tmp_path / "anchor.json"
    path.write_text(docket("verify", "--json").stdout)
    assert docket("verify", "--anchor", str(path)).returncode == 0


# A forged genesis ----------------------------------------------------------

def _genesis(conn):
    stream, version, topic, state = conn.execute(
        "SELECT originator_id, originator_version, topic, state FROM stored_events WHERE rowid = 1").fetchone()
    return stream, version, topic, json.loads(state)


def _state(body) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def forge_other_type(conn):
    body = {"payload": {"run_id": "r", "task_id": "x", "title": "forged"}, "recorded_at": T0}
    conn.execute("UPDATE stored_events SET originator_id = 'task:x', topic = 'TaskPlanned.v1', state = ? "
                 "WHERE rowid = 1", (_state(body),))


def forge_genesis_digest(conn):
    _, _, _, body = _genesis(conn)
    body["payload"]["genesis_digest"] = "0" * 64
    conn.execute("UPDATE stored_events SET state = ? WHERE rowid = 1", (_state(body),))


def forge_chain_name(conn):
    _, _, _, body = _genesis(conn)
    body["payload"]["chain"] = "sha1-chain"
    conn.execute("UPDATE stored_events SET state = ? WHERE rowid = 1", (_state(body),))


def forge_stream(conn):
    conn.execute("UPDATE stored_events SET originator_id = 'ledger-2' WHERE rowid = 1")


def forge_version(conn):
    conn.execute("UPDATE stored_events SET originator_version = 2 WHERE rowid = 1")


def forge_extra_field(conn):
    _, _, _, body = _genesis(conn)
    body["payload"]["note"] = "forged"
    conn.execute("UPDATE stored_events SET state = ? WHERE rowid = 1", (_state(body),))


FORGERIES = [forge_other_type, forge_genesis_digest, forge_chain_name, forge_stream, forge_version, forge_extra_field]


@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__)
def test_a_forged_genesis_with_a_recomputed_chain_fails_at_position_1(docket, ledger, forge):
    conn = sqlite3.connect(ledger)
    with conn:
        forge(conn)
        rechain_from(conn, 1)
    conn.close()
    fails(docket("verify", check=False), "chain-broken", 1, "position 1")


# Missing tables --------------------------------------------------------------

@pytest.mark.parametrize("table", ["chain", "stored_events", "tracking"])
def test_a_dropped_table_fails_verification_and_log(docket, ledger, table):
    conn = sqlite3.connect(ledger)
    conn.execute(f"DROP TABLE {table}")
    conn.close()
    fails(docket("verify", check=False), "ledger-unverifiable", 1, table)
    result = docket("verify", "--json", check=False)
    assert result.returncode == 1 and json.loads(result.stdout)["ok"] is False
    fails(docket("log", check=False), "ledger-unverifiable", 1, table, "docket verify")


@pytest.mark.parametrize("cut", ["events", "digests"])
def test_log_refuses_a_ledger_whose_chain_and_events_disagree(docket, ledger, cut):
    conn = sqlite3.connect(ledger)
    with conn:
        if cut == "events":
            conn.execute("DELETE FROM stored_events WHERE rowid = (SELECT MAX(rowid) FROM stored_events)")
        else:
            conn.execute("DELETE FROM chain WHERE position = (SELECT MAX(position) FROM chain)")
    conn.close()
    result = docket("log", check=False)
    fails(result, "ledger-unverifiable", 1, "docket verify")
    assert result.stdout == ""


# Views are a free local anchor -------------------------------------------------

def test_a_cut_tail_is_caught_by_the_views(docket, ledger):
    head = docket("status", "--json").json()["position"]  # the views remember this head
    conn = sqlite3.connect(ledger)
    with conn:
        conn.execute("DELETE FROM stored_events WHERE rowid > ?", (head - 2,))
        conn.execute("DELETE FROM chain WHERE position > ?", (head - 2,))
    conn.close()
    assert docket("verify").returncode == 0  # invisible to the chain alone
    fails(docket("status", check=False), "ledger-cut", 1, f"position {head}", "docket replay")
    fails(docket("replay", check=False), "ledger-cut", 1, f"position {head}")
    assert docket("status", "--json").json()["position"] == head - 2  # rebuilt: later commands work
    assert docket("replay").returncode == 0


def test_a_rewritten_ledger_is_caught_by_the_views(docket, ledger):
    head = docket("status", "--json").json()["position"]
    conn = sqlite3.connect(ledger)
    with conn:
        stream, version, topic, state = conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM stored_events WHERE rowid = ?",
            (head,)).fetchone()
        body = json.loads(state)
        body["payload"]["title"] = "forged"
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (_state(body), head))
        rechain_from(conn, head)
    conn.close()
    assert docket("verify").returncode == 0
    fails(docket("replay", check=False), "ledger-rewritten", 1, f"position {head}")
    assert docket("status", "--json").json()["position"] == head
    assert docket("replay").returncode == 0


def test_views_of_a_replaced_ledger_are_rebuilt_silently(docket, ledger):
    docket("status")
    for path in (ledger, ledger.with_name("ledger.sqlite-wal"), ledger.with_name("ledger.sqlite-shm")):
        path.unlink(missing_ok=True)
    docket("init", now="2026-03-03T00:00:00.000Z")
    result = docket("status", "--json")
    assert result.json()["position"] == 1 and result.json()["runs"] == []
