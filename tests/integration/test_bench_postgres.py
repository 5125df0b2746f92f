"""The PostgreSQL benchmark's workloads run at a tiny size (make test does not run benchmarks).

Each append side writes the same events as the others, docket's stored bytes on the bare recorder too, and docket's
chains verify; a burst from several processes loses nothing; a ledger filled with COPY holds what docket's own
appends of the same events hold, verifies, and both reads of it run. No time is asserted.
"""

from __future__ import annotations

import psycopg
import pytest

from bench.common import mixed_events
from bench.postgres import (APPEND_SIDES, docket_ledger, fill_ledger, fresh_database, measure_append, measure_burst,
                            measure_verify, verified_head)


def _rows(url: str, after: int = 0) -> list[tuple]:
    """(stream, version, type, stored bytes) of every event after a position, in ledger order."""
    with psycopg.connect(url) as conn:
        return [(r[0], r[1], r[2], bytes(r[3])) for r in conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM stored_events WHERE notification_id > %s "
            "ORDER BY notification_id", (after,))]


@pytest.mark.parametrize("per_transaction", [1, 5])
def test_every_append_side_writes_the_same_events_and_dockets_chains_verify(postgres_url, postgres_server_url,
                                                                            per_transaction):
    with fresh_database(postgres_server_url) as recorder_url, fresh_database(postgres_server_url) as bare_url:
        urls = {"docket": postgres_url, "recorder": recorder_url, "bare": bare_url}
        sides = measure_append(urls, per_transaction=per_transaction, transactions=3, rounds=2)

        expected = 1 + per_transaction + 2 * 3 * per_transaction  # the first event, the warm-up, the rounds
        assert sides.events == {side: expected for side in APPEND_SIDES}
        assert sides.heads == {"docket": expected, "recorder": expected}  # verified through the reader port
        assert [len(sides.seconds[side]) for side in APPEND_SIDES] == [2, 2, 2]
        # the bare recorder stored exactly the bytes docket stored (all but each side's own first event)
        assert _rows(bare_url, 1) == _rows(postgres_url, 1) == _rows(recorder_url, 1)


def test_appends_from_several_processes_at_once_all_land_and_the_chain_verifies(postgres_url):
    burst = measure_burst(postgres_url, processes=2, appends=5)

    assert burst.events == 10 and len(burst.latencies_s) == 10
    assert burst.head == 1 + 2 + 10  # the genesis, each process's first append, the burst
    assert burst.wall_s > 0 and burst.percentile(99) >= burst.percentile(50) > 0


def test_a_ledger_filled_with_copy_holds_what_dockets_appends_hold_and_verifies(postgres_url, postgres_server_url):
    size = 2_500  # two completed Merkle blocks of 1,024, over three COPY chunks
    assert fill_ledger(postgres_url, size, chunk=1_000) == size

    assert verified_head(postgres_url) == size
    with fresh_database(postgres_server_url) as appended_url:  # the same events through Ledger.append
        ledger = docket_ledger(appended_url)
        try:
            ledger.append(list(mixed_events(size - 1, first_position=2)))
        finally:
            ledger.close()
        assert _rows(postgres_url) == _rows(appended_url)  # the same genesis and stored bytes, in the same order
        with psycopg.connect(postgres_url) as filled, psycopg.connect(appended_url) as appended:
            for query in ("SELECT position, digest FROM chain ORDER BY position",
                          "SELECT height, node, digest, hash FROM merkle_nodes ORDER BY height, node"):
                assert filled.execute(query).fetchall() == appended.execute(query).fetchall()
            assert filled.execute("SELECT COUNT(*) FROM merkle_nodes").fetchone()[0] == 2

    sides = measure_verify(postgres_url, size, rounds=1)
    assert sides.verified == size  # docket verify's own report, on DOCKET_DATABASE_URL
    assert len(sides.verify_s) == len(sides.plain_s) == 1
