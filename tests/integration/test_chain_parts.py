"""Verifying the chain in parts, in child processes, gives exactly the single pass's result.

Ledgers here are small: parts are forced with ``parts=`` and ``min_events=0``.
"""

from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from docket.adapters.world.ledger import chain_parts
from docket.adapters.world.ledger.chain_parts import verify_chain_in_parts
from docket.adapters.world.ledger.ledger_rows import read_chain_rows
from docket.domain.kernel.canonical import canonical_json
from docket.domain.kernel.chain import GENESIS_DIGEST, ChainHead, chain_entry, next_digest, verify_chain
from docket.domain.kernel.errors import VerificationFailed

EVENTS = 60  # in 2 parts split at 30; in 3 at 20 and 40


def _state(second: int, n: int) -> bytes:
    return canonical_json({"payload": {"n": n}, "recorded_at": f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000Z"})


def _ledger(path, states=None):
    """A ledger file of the two tables verify reads, with a correct chain over the given states."""
    states = states or [_state(n, n) for n in range(EVENTS)]
    digest, rows = GENESIS_DIGEST, []
    for position, state in enumerate(states, start=1):
        stream, version = f"s{position % 7}", position // 7 + 1
        digest = next_digest(digest, chain_entry(position, stream, version, "A.v1", state))
        rows.append((position, stream, version, "A.v1", state, digest))
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT, state BLOB)")
    conn.execute("CREATE TABLE chain (position INTEGER PRIMARY KEY, digest TEXT NOT NULL)")
    conn.executemany("INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
                     "VALUES (?, ?, ?, ?, ?)", [row[:5] for row in rows])
    conn.executemany("INSERT INTO chain VALUES (?, ?)", [(row[0], row[5]) for row in rows])
    conn.commit()
    return conn, rows


def _both(conn, parts, anchor=None, until=None):
    single = verify_chain(read_chain_rows(conn, until=until), anchor=anchor)
    in_parts = verify_chain_in_parts(conn, anchor=anchor, until=until, parts=parts, min_events=0)
    assert in_parts == single
    return in_parts


def _forked(monkeypatch):
    """Count the parts run, to show a case really was verified in parts (or fell back to one pass)."""
    runs = []
    real = chain_parts._run_parts

    def counting(path, plan, progress):
        runs.append(len(plan))
        return real(path, plan, progress)

    monkeypatch.setattr(chain_parts, "_run_parts", counting)
    return runs


@pytest.mark.parametrize("parts", [2, 3, 4])
def test_a_clean_ledger_verifies_in_parts_to_the_same_head(tmp_path, monkeypatch, parts):
    runs = _forked(monkeypatch)
    conn, rows = _ledger(tmp_path / "l.sqlite")
    assert _both(conn, parts) == (ChainHead(EVENTS, rows[-1][5]), None)
    assert _both(conn, parts, until=45)[0] == ChainHead(45, rows[44][5])
    assert runs == [parts, parts]


def test_below_the_threshold_or_on_one_cpu_verify_is_one_pass(tmp_path, monkeypatch):
    runs = _forked(monkeypatch)
    conn, _ = _ledger(tmp_path / "l.sqlite")
    verify_chain_in_parts(conn, parts=2, min_events=EVENTS + 1)
    verify_chain_in_parts(conn, parts=1, min_events=0)
    monkeypatch.setattr(chain_parts, "usable_cpus", lambda: 1)
    verify_chain_in_parts(conn, min_events=0)
    assert runs == []


# Positions in part 1, at the boundaries (m and m + 1), inside a later part, and the last event.
DAMAGED = [1, 5, 19, 20, 21, 29, 30, 31, 40, 41, 45, EVENTS]


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("position", DAMAGED)
def test_a_wrong_digest_is_named_where_one_pass_names_it(tmp_path, parts, position):
    conn, _ = _ledger(tmp_path / "l.sqlite")
    conn.execute("UPDATE chain SET digest = ? WHERE position = ?", ("0" * 64, position))
    conn.commit()
    _, broken = _both(conn, parts)
    assert broken is not None and broken.position == position


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("position", DAMAGED)
def test_a_changed_event_or_a_missing_digest_is_named_where_one_pass_names_it(tmp_path, parts, position):
    conn, _ = _ledger(tmp_path / "l.sqlite")
    conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (_state(position - 1, 999), position))
    conn.commit()
    assert _both(conn, parts)[1].position == position
    conn.execute("DELETE FROM chain WHERE position = ?", (position,))  # at a boundary: that part cannot start
    conn.commit()
    assert "digest missing" in _both(conn, parts)[1].reason


@pytest.mark.parametrize("position", [5, 30, 31, 45])
def test_a_missing_event_is_named_where_one_pass_names_it(tmp_path, position):
    conn, _ = _ledger(tmp_path / "l.sqlite")
    conn.execute("DELETE FROM stored_events WHERE rowid = ?", (position,))
    conn.commit()
    assert _both(conn, 2)[1].position == position


def test_a_time_running_backwards_across_a_boundary_is_named(tmp_path):
    """The event after the boundary is recorded before the one at it, with a chain that matches its bytes."""
    states = [_state(n, n) for n in range(EVENTS)]
    states[30] = _state(28, 30)  # position 31, after the boundary at 30 when in 2 parts
    conn, _ = _ledger(tmp_path / "l.sqlite", states)
    _, broken = _both(conn, 2)
    assert broken.position == 31 and "earlier than" in broken.reason
    states = [_state(n, n) for n in range(EVENTS)]
    states[29] = _state(31, 29)  # position 30, the boundary itself, later than the one after it
    conn, _ = _ledger(tmp_path / "m.sqlite", states)
    assert _both(conn, 2)[1].position == 31


def test_a_state_without_a_recorded_time_at_a_boundary_verifies_in_one_pass(tmp_path, monkeypatch):
    runs = _forked(monkeypatch)
    states = [_state(n, n) for n in range(EVENTS)]
    states[29] = b'{"not":"docket"}'
    conn, _ = _ledger(tmp_path / "l.sqlite", states)
    assert _both(conn, 2)[1] is None
    assert runs == []


@pytest.mark.parametrize("position", [10, 30, 31, 50, EVENTS])
def test_an_anchor_in_either_part_is_checked_as_in_one_pass(tmp_path, position):
    conn, rows = _ledger(tmp_path / "l.sqlite")
    assert _both(conn, 2, anchor=ChainHead(position, rows[position - 1][5]))[1] is None
    _, broken = _both(conn, 2, anchor=ChainHead(position, "0" * 64))
    assert broken.position == position and "anchor" in broken.reason


def test_a_ledger_that_ends_before_the_anchor_is_named(tmp_path):
    conn, rows = _ledger(tmp_path / "l.sqlite")
    _, broken = _both(conn, 2, anchor=ChainHead(EVENTS + 5, "0" * 64))
    assert broken.position == EVENTS + 1 and "ends before the anchor" in broken.reason


def test_a_cut_tail_verifies_to_the_new_end_as_in_one_pass(tmp_path):
    """The orphan digest past the new end is verify_ledger's check, after the chain: the chain itself holds."""
    conn, rows = _ledger(tmp_path / "l.sqlite")
    conn.execute("DELETE FROM stored_events WHERE rowid > 50")
    conn.commit()
    assert _both(conn, 2) == (ChainHead(50, rows[49][5]), None)
    _, broken = _both(conn, 2, anchor=ChainHead(EVENTS, rows[-1][5]))
    assert broken.position == 51 and "ends before the anchor" in broken.reason


def test_the_parts_report_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(chain_parts, "PROGRESS_EVERY", 4)
    conn, _ = _ledger(tmp_path / "l.sqlite")
    seen = []
    verify_chain_in_parts(conn, parts=2, min_events=0, progress=seen.append)
    assert seen and max(seen) <= EVENTS


def _dies(rows, **kwargs):
    if kwargs["start"].position:  # the second part's process is killed
        os.kill(os.getpid(), signal.SIGKILL)
    return verify_chain(rows, **kwargs)


def _fails(rows, **kwargs):
    if kwargs["start"].position:
        raise sqlite3.DatabaseError("database disk image is malformed")
    return verify_chain(rows, **kwargs)


@pytest.mark.parametrize("child", [_dies, _fails])
def test_a_part_that_does_not_finish_is_an_error_not_ok(tmp_path, monkeypatch, child):
    conn, _ = _ledger(tmp_path / "l.sqlite")
    monkeypatch.setattr(chain_parts, "verify_chain", child)
    with pytest.raises(VerificationFailed) as failed:
        verify_chain_in_parts(conn, parts=2, min_events=0)
    assert failed.value.code == "verify-incomplete" and "positions 31-60 were not verified" in failed.value.message


def test_verify_ledger_in_parts_reports_what_one_pass_reports(tmp_path, monkeypatch):
    """A real ledger: genesis, chain in parts, the orphan digest of a cut tail, the schema."""
    from bench.common import fill, mixed_events, new_ledger

    from docket.adapters.service_layer.kernel.verification import verify_ledger
    from docket.adapters.world.ledger.reader import ledger_reader

    path = tmp_path / "real.sqlite"
    ledger = new_ledger(path)
    fill(ledger, mixed_events(300, per_run=100))
    ledger.close()
    with ledger_reader(path) as reader:
        single = verify_ledger(reader)
        monkeypatch.setattr(chain_parts, "PARTS_FROM_EVENTS", 0)
        monkeypatch.setattr(chain_parts, "usable_cpus", lambda: 2)
        runs = _forked(monkeypatch)
        assert verify_ledger(reader) == single and single["events"] == 301
        assert runs == [2]
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM stored_events WHERE rowid > 290")
    with ledger_reader(path) as reader, pytest.raises(VerificationFailed) as failed:
        verify_ledger(reader)
    assert failed.value.code == "chain-broken" and "position 291" in failed.value.message
