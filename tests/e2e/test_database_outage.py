"""The shared ledger's database goes away mid-run (its cluster stopped, then started again): `docket go` records
nothing meanwhile, says it waits, and goes on once the database is back, with nothing recorded twice."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from tests import postgres_cluster
from tests.e2e.go_world import make_go_world, wait_until

TASKS = '''\
[[tasks]]
id = "a"
title = "a"
prompt = """sleep: 4
write a.py: A = 1
"""

[[tasks]]
id = "b"
title = "b"
prompt = """sleep: 4
write b.py: B = 1
"""
'''


@pytest.fixture
def cluster():
    """A cluster of this test's own, to stop and start (never the suite's shared one)."""
    why = postgres_cluster.available()
    if why:
        pytest.skip(f"PostgreSQL: {why}")
    folder = tempfile.mkdtemp(prefix="docket-pg-")
    os.chmod(folder, 0o755)  # its server may run as another user
    try:
        yield folder, postgres_cluster.start(folder)
    finally:
        postgres_cluster.stop(folder)


def test_a_run_rides_out_its_database_going_away_and_coming_back(tmp_path: Path, cluster):
    folder, url = cluster
    world = make_go_world(tmp_path, tasks=TASKS)
    world.env.update(DOCKET_DATABASE_URL=url, DOCKET_DATABASE_WAIT="120")
    assert world.run("init").returncode == 0
    going = world.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--parallel", "2", "--json")
    try:
        assert wait_until(lambda: len(world.events("WorkerLaunched")) == 2, timeout=60)
        postgres_cluster.stop(folder, keep=True)  # while both agents work
        time.sleep(15)  # longer than a connection is waited for (10 s), shorter than a lease (60 s)
        postgres_cluster.start(folder)
        out, err = going.communicate(timeout=300)
    finally:
        if going.poll() is None:
            going.kill()
            going.communicate()
    assert going.returncode == 0, err
    assert json.loads(out)["outcome"] == "delivered"
    assert "cannot be reached; waiting up to 120 s" in err and "is back" in err
    assert "Traceback" not in err

    log = json.loads(world.run("log", "--json").stdout)["events"]
    per_generation = Counter((e["type"], e["payload"].get("worker_id"), e["payload"].get("generation")) for e in log
                             if e["type"].split(".")[0] in ("WorkerLaunched", "WorkerExited", "WorkerLaunchRequested"))
    assert set(per_generation.values()) == {1} and len(per_generation) == 6  # each once, for r1.a and r1.b gen 1
    assert sum(e["type"].startswith("ReceiptSealed") for e in log) == 1
    # the queue rolls: the target may move once per verified step, but never twice from the same commit
    moves = [e["payload"] for e in log if e["type"].startswith("IntegrationTargetRequested")]
    completed = Counter(e["payload"]["intent_id"] for e in log if e["type"].startswith("IntegrationCompleted"))
    assert 1 <= len(moves) <= 2 and all(completed[m["intent_id"]] == 1 for m in moves)
    assert [m["expected_commit"] for m in moves[1:]] == [m["commit"] for m in moves[:-1]]
    verified = world.run("verify")
    assert verified.returncode == 0, verified.stderr
    assert world.file_at("main", "a.py") == "A = 1\n" and world.file_at("main", "b.py") == "B = 1\n"
