import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from docket.domain.canonical import canonical_json
from docket.domain.chain import GENESIS_DIGEST, ChainHead, ChainRow, chain_entry, next_digest, verify_chain

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
