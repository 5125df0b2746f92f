import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from docket.domain.kernel.canonical import canonical_json
from docket.domain.kernel.chain import GENESIS_DIGEST, ChainHead, ChainRow, chain_entry, next_digest, verify_chain

events = st.lists(
    st.tuples(st.text(min_size=1, max_size=20), st.integers(1, 50), st.sampled_from(["A.v1", "B.v1"]),
              st.binary(max_size=64)),
    min_size=1, max_size=30,
)


def build(evs):
    digest, rows = GENESIS_DIGEST, []
    for i, (stream, version, type_, state) in enumerate(evs, start=1):
        digest = next_digest(digest, chain_entry(i, stream, version, type_, state))
        rows.append(ChainRow(i, stream, version, type_, state, digest))
    return rows


@given(st.integers(1, 10**12), st.text(max_size=30), st.integers(0, 10**9), st.text(max_size=30), st.binary(max_size=200))
def test_entry_is_the_canonical_json_of_the_chain_record(position, stream, version, type_, state):
    expected = canonical_json({"position": position, "stream": stream, "version": version, "type": type_,
                               "state_sha256": hashlib.sha256(state).hexdigest()})
    assert chain_entry(position, stream, version, type_, state) == expected


@given(events)
def test_an_intact_chain_verifies_to_its_head(evs):
    rows = build(evs)
    head, broken = verify_chain(rows)
    assert broken is None
    assert head == ChainHead(len(rows), rows[-1].digest)


@given(events, st.data())
def test_changing_any_field_of_any_event_breaks_the_chain_exactly_there(evs, data):
    rows = build(evs)
    i = data.draw(st.integers(0, len(rows) - 1))
    field = data.draw(st.sampled_from(["stream", "version", "type", "state"]))
    row = rows[i]
    changed = {"stream": row.stream + "x", "version": row.version + 1, "type": row.type + "x",
               "state": row.state + b"\x00"}[field]
    rows[i] = row._replace(**{field: changed})
    _, broken = verify_chain(rows)
    assert broken is not None and broken.position == i + 1


@given(events, st.data())
def test_a_missing_event_is_named(evs, data):
    rows = build(evs)
    i = data.draw(st.integers(0, len(rows) - 1))
    del rows[i]
    _, broken = verify_chain(rows)
    if i == len(evs) - 1:
        assert broken is None  # a cut tail needs an anchor
        _, broken = verify_chain(rows, anchor=ChainHead(len(evs), build(evs)[-1].digest))
    assert broken is not None and broken.position == i + 1


@given(events, st.data())
def test_the_anchor_must_match(evs, data):
    rows = build(evs)
    i = data.draw(st.integers(0, len(rows) - 1))
    _, broken = verify_chain(rows, anchor=ChainHead(i + 1, "0" * 64))
    assert broken is not None and broken.position == i + 1
    _, broken = verify_chain(rows, anchor=ChainHead(i + 1, rows[i].digest))
    assert broken is None


def test_genesis_is_fixed():
    assert GENESIS_DIGEST == hashlib.sha256(b"docket ledger genesis v1").hexdigest()
    assert json.loads(chain_entry(1, "s", 1, "t", b""))["position"] == 1


def _state(recorded_at: str, i: int = 0) -> bytes:
    return canonical_json({"payload": {"n": i}, "recorded_at": recorded_at})


def _times(count: int) -> list[str]:
    return [f"2026-01-01T00:00:{second:02d}.000Z" for second in range(count)]


@given(st.integers(2, 30), st.data())
def test_a_recorded_time_earlier_than_its_predecessor_breaks_the_chain_there(count, data):
    times = _times(count)
    i = data.draw(st.integers(1, count - 1))
    times[i] = "1999-12-31T23:59:59.999Z"  # rewritten by a forger who then recomputed every digest
    rows = build([("s", n + 1, "A.v1", _state(t, n)) for n, t in enumerate(times)])
    head, broken = verify_chain(rows)
    assert broken is not None and broken.position == i + 1
    assert "1999-12-31T23:59:59.999Z" in broken.reason and times[i - 1] in broken.reason
    assert head.position == i


def test_equal_and_later_times_verify():
    times = ["2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.001Z",
             "2027-01-01T00:00:00.000Z"]
    rows = build([("s", n + 1, "A.v1", _state(t, n)) for n, t in enumerate(times)])
    assert verify_chain(rows) == (ChainHead(4, rows[-1].digest), None)


def test_a_state_without_a_recorded_time_has_none_to_compare():
    """The library's own recorder contract tests store states that are not docket's canonical form."""
    states = [_state("2026-01-02T00:00:00.000Z"), b"not docket's form", _state("2026-01-03T00:00:00.000Z"),
              b"", _state("2026-01-01T00:00:00.000Z")]
    rows = build([("s", n + 1, "A.v1", state) for n, state in enumerate(states)])
    _, broken = verify_chain(rows)
    assert broken is not None and broken.position == 5  # earlier than position 3's time
    assert "2026-01-03T00:00:00.000Z" in broken.reason and "2026-01-01T00:00:00.000Z" in broken.reason


def test_a_forged_time_that_is_not_text_is_named_escaped():
    forged = _state("2026-01-02T00:00:00.000Z")[:-26] + b"0\xff\x1b[2J".ljust(24, b"0") + b'"}'
    states = [_state("2026-01-01T00:00:00.000Z"), forged]
    _, broken = verify_chain(build([("s", n + 1, "A.v1", state) for n, state in enumerate(states)]))
    assert broken is not None and broken.position == 2
    assert "0\\xff\\x1b[2J" in broken.reason and broken.reason.isprintable()


def test_quoted_streams_and_types_are_cached_within_a_bound():
    from docket.domain.kernel.chain import _STREAMS

    for i in range(100_005):
        _STREAMS[f"s{i}"]
    assert len(_STREAMS) <= 100_000
    assert chain_entry(7, 's"\n\u00e9', 2, "t\\", b"x") == canonical_json(
        {"position": 7, "stream": 's"\n\u00e9', "version": 2, "type": "t\\",
         "state_sha256": hashlib.sha256(b"x").hexdigest()})


def test_rows_read_in_batches_verify_across_batch_boundaries():
    """read_chain_rows hands on SQLite rows a thousand at a time; a break after the first batch is still named."""
    import sqlite3

    from docket.adapters.world.ledger.ledger_rows import read_chain_rows

    rows = build([(f"s{n % 7}", n // 7 + 1, "A.v1", _state("2026-01-01T00:00:00.000Z", n)) for n in range(2_500)])
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT, state BLOB)")
    conn.execute("CREATE TABLE chain (position INTEGER PRIMARY KEY, digest TEXT NOT NULL)")
    conn.executemany("INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
                     "VALUES (?, ?, ?, ?, ?)", [row[:5] for row in rows])
    conn.executemany("INSERT INTO chain VALUES (?, ?)", [(row.position, row.digest) for row in rows])
    assert verify_chain(read_chain_rows(conn)) == (ChainHead(2_500, rows[-1].digest), None)
    assert verify_chain(read_chain_rows(conn, after=1_000, until=2_000),
                        start=ChainHead(1_000, rows[999].digest)) == (ChainHead(2_000, rows[1_999].digest), None)
    conn.execute("UPDATE chain SET digest = ? WHERE position = 1500", ("0" * 64,))
    _, broken = verify_chain(read_chain_rows(conn))
    assert broken is not None and broken.position == 1_500
