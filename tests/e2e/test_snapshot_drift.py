"""`docket replay` recomputes the snapshots from the events: a forged one is reported and repaired."""

from __future__ import annotations

import sqlite3

from ..conftest import T0


def test_replay_reports_and_repairs_a_forged_snapshot(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    docket("worker", "register", "r1", "--role", "implementer", "--id", "w1", now=T0)
    token = docket("lease", "grant", "wt", "--worker", "w1", "--generation", "1", "--ttl", "10m", "--json",
                   now=T0).json()["token"]
    for _ in range(12):  # a heartbeat stream long enough to be snapshotted
        docket("lease", "renew", "wt", "--token", str(token), "--ttl", "10m", now=T0)
    assert docket("replay", now=T0).returncode == 0
    conn = sqlite3.connect(docket.ledger)
    with conn:
        forged = conn.execute("UPDATE snapshots SET state = replace(state, ?, ?) WHERE stream = 'lease:wt'",
                              (b'"status":"held"', b'"status":"released"')).rowcount
    conn.close()
    assert forged == 1
    result = docket("replay", check=False, now=T0)
    assert result.returncode == 1
    assert result.stderr.startswith("docket: error: snapshot-drift: snapshots differed from their events for lease:wt")
    assert docket("replay", now=T0).returncode == 0  # repaired
    renewed = docket("lease", "renew", "wt", "--token", str(token), "--ttl", "10m", check=False, now=T0)
    assert renewed.returncode == 0, renewed.stderr  # the lease is held, as the events say
