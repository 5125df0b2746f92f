"""Bytes in the ledger file that are not UTF-8 text where docket stores text (a digest, a stream, a type, an event's
state) are tampering like any other edit: `docket verify` fails (exit 1) naming the position, as the same edit with
an ASCII byte does, and never reads as bad input (exit 2, "database: Could not decode to UTF-8")."""

from __future__ import annotations

import re
import sqlite3

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.domain.events import TaskPlanned

T0 = "2026-01-01T00:00:00.000Z"
EVENTS = 8


@pytest.fixture
def ledger(docket):
    docket("init", now=T0)
    ledger = Ledger(docket.ledger)
    for i in range(EVENTS - 1):
        ledger.append([TaskPlanned(stream=f"task:t{i}", version=1, recorded_at=T0, task_id=f"t{i}",
                                   run_id="r", title=f"task {i}")])
    ledger.close()
    assert docket("verify").returncode == 0
    return docket.ledger


def _edit(path, sql: str, *params) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, params)
    conn.close()


def _first_byte_of_digest(path, position: int, byte: bytes) -> None:
    """The stored digest at position with its first byte replaced, kept as TEXT (what a hex editor leaves)."""
    _edit(path, "UPDATE chain SET digest = CAST(? || CAST(substr(digest, 2) AS BLOB) AS TEXT) WHERE position = ?",
          byte, position)


def _verify_fails_at(docket, position: int) -> str:
    result = docket("verify", check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(rf"docket: error: chain-broken: position {position}: .+", line), line
    return line


@pytest.mark.parametrize("position", [1, 4, EVENTS])
@pytest.mark.parametrize("byte", [b"\xff", b"g"])  # g: an ASCII byte no digest holds
def test_a_stored_digest_byte_changed_is_a_broken_chain_whatever_the_byte(docket, ledger, position, byte):
    _first_byte_of_digest(ledger, position, byte)
    _verify_fails_at(docket, position)


@pytest.mark.parametrize("column", ["topic", "originator_id", "state"])
def test_a_stored_column_that_is_not_utf8_is_a_broken_chain(docket, ledger, column):
    _edit(ledger, f"UPDATE stored_events SET {column} = CAST(CAST({column} AS BLOB) || X'ff' AS TEXT) WHERE rowid = 5")
    line = _verify_fails_at(docket, 5)
    assert "UTF-8" in line


@pytest.mark.parametrize("args", [("log",), ("log", "--json"), ("verify", "--json")])
def test_other_readers_of_an_undecodable_ledger_fail_verification_not_input(docket, ledger, args):
    _edit(ledger, "UPDATE stored_events SET topic = CAST(CAST(topic AS BLOB) || X'ff' AS TEXT) WHERE rowid = 5")
    result = docket(*args, check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "position 5" in result.stderr.splitlines()[0]
