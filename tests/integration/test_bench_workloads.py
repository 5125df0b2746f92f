"""The benchmarks' synthetic workloads are real docket events that make a verifiable ledger.

Benchmarks are not tests and `make test` does not run them, so this keeps their
builders honest at a tiny size: a change to the events or the ledger that breaks
a workload fails here, not in the next `make bench`.
"""

from __future__ import annotations

from bench.common import fill, lease_events, mixed_events, new_ledger, read_chain_rows, read_only
from bench.streams import _build

from docket.domain.kernel.chain import verify_chain


def test_lease_and_mixed_workloads_make_a_verifiable_ledger(tmp_path):
    events = lease_events(120, resources=7)
    assert [e.version for e in events[:7]] == [1] * 7 and events[7].version == 2
    assert lease_events(1, start=120, resources=7)[0].version == 120 // 7 + 1  # a later call continues the streams
    path = tmp_path / "mixed.sqlite"
    ledger = new_ledger(path)
    fill(ledger, mixed_events(6_000, per_run=2_000))
    ledger.close()
    with read_only(path) as conn:
        head, broken = verify_chain(read_chain_rows(conn))
    assert broken is None and head.position == 6_001


def test_the_streams_workload_has_one_long_and_many_short_streams(tmp_path):
    ledger, clock, tokens = _build(tmp_path / "streams.sqlite", short_streams=3, long_events=40)
    try:
        assert len(ledger.history("lease:long")) == 40
        assert [len(ledger.history(f"lease:short/{i}")) for i in range(3)] == [10, 10, 10]
    finally:
        ledger.close()
