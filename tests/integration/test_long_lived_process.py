"""A long-lived docket process (docket go, docket watch) opens the ledger and the views many times while its
SQLite connections stay open. Closing any descriptor of a file drops all of a process's POSIX locks on it, SQLite's
included; another process closing its connection then takes the database for unused and deletes its write-ahead
log under the first one, which goes on writing into a deleted file: the chain forks. Found by `docket go`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.world.clock import SystemClock
from docket.domain import run as run_aggregate
from tests.conftest import make_repo

OTHER = """
import sys
from pathlib import Path
from docket.adapters.service_layer.kernel.ledger import Ledger
ledger = Ledger(Path(sys.argv[1]))
print(ledger.head())
ledger.close()
"""


def other_process_head(path: Path) -> int:
    done = subprocess.run([sys.executable, "-c", OTHER, str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_second_ledger_object_in_one_process_does_not_cost_the_first_its_write_ahead_log(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    subprocess.run([sys.executable, "-m", "docket", "init"], cwd=repo, check=True, capture_output=True)
    path = repo / ".git" / "docket" / "ledger.sqlite"
    clock = SystemClock()
    first = Ledger(path)
    try:
        for number in range(3):
            first.decide(lambda now, n=number: run_aggregate.open_run(f"r{n}", f"i{n}", "g", "main", None,
                                                                      str(repo / ".git"), now), clock.now())
            second = Ledger(path)  # what a new thread of `docket go` does: the file is checked again
            second.close()
            assert other_process_head(path) == first.head()  # another process sees every committed event
        assert Path(f"{path}-wal").exists()
    finally:
        first.close()
