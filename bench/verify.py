"""2. verify: ``docket verify`` against a plain ``sqlite3`` read of the same rows.

Baseline: a Python process that opens the ledger read-only with ``sqlite3`` and
iterates over every event's position, stream, version, type and state joined
with its stored digest (the rows verify must read), doing nothing with them.
docket: the whole ``docket verify --ledger FILE`` process, which reads the same
rows, recomputes every digest, checks recorded times, the genesis event and the
schema, in parts in as many processes as it uses on this machine (see
adapters/world/ledger/chain_parts.py). The two processes take turns; ratio = baseline
time / verify time (the fraction of a plain read's speed that verify keeps).
For information, a third process takes turns with them: ``docket verify``
pinned to one CPU with ``taskset``, so it verifies in one pass.

For information, the same comparison inside one process (no start-up on either
side): ``read_chain_rows`` + ``verify_chain`` against iterating the plain query,
and the floor of any verifier written in Python: the plain read plus the two
sha256 per event the chain's definition requires, and nothing else.
Both sides are warmed once (the file is in the page cache) before any timing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import sys
from pathlib import Path

from docket.adapters.world.ledger.chain_parts import part_count, usable_cpus
from docket.domain.kernel.chain import verify_chain

from .common import BIN, Row, cached_ledger, interleaved, log, median, read_chain_rows, read_only, run_process, spread

GOAL = 0.5
PLAIN_SQL = ("SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, c.digest "
             "FROM stored_events e LEFT JOIN chain c ON c.position = e.rowid ORDER BY e.rowid")
PLAIN_READ = f"""
import sqlite3, sys
conn = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
for row in conn.execute({PLAIN_SQL!r}):
    pass
"""


def plain_read(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        count = 0
        for _ in conn.execute(PLAIN_SQL):
            count += 1
        return count
    finally:
        conn.close()


def two_digests_only(path: Path) -> int:
    """The floor of any verifier in Python: the plain read plus the two sha256 per event, nothing else."""
    sha256 = hashlib.sha256
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        digest = bytes(32)
        for _position, _stream, _version, _type, state, _stored in conn.execute(PLAIN_SQL):
            digest = sha256(digest + sha256(state).hexdigest().encode()).digest()
        return len(digest)
    finally:
        conn.close()


def docket_verify(path: Path) -> int:
    with read_only(path) as conn:
        head, broken = verify_chain(read_chain_rows(conn))
    assert broken is None, broken
    return head.position


def run(quick: bool) -> list[Row]:
    size, rounds = (200_000, 3) if quick else (1_000_000, 5)
    path = cached_ledger(size)
    assert docket_verify(path) == size and plain_read(path) == size  # warm-up and sanity check
    plain_argv = [sys.executable, "-c", PLAIN_READ, str(path)]
    verify_argv = [str(BIN / "docket"), "verify", "--ledger", str(path)]
    processes = part_count(size)
    whole_runs = {"plain": lambda: run_process(plain_argv), "verify": lambda: run_process(verify_argv)}
    taskset = shutil.which("taskset")
    if taskset and processes > 1:  # one CPU: verify takes its single pass
        one_cpu_argv = [taskset, "-c", str(min(os.sched_getaffinity(0))), *verify_argv]
        whole_runs["one pass"] = lambda: run_process(one_cpu_argv)
    for warm_up in whole_runs.values():  # the same programs as timed
        warm_up()
    whole = interleaved(whole_runs, rounds)
    inside = interleaved({"plain": lambda: plain_read(path), "verify": lambda: docket_verify(path),
                          "floor": lambda: two_digests_only(path)}, rounds)
    plain, verify = median(whole["plain"]), median(whole["verify"])
    plain_in, verify_in, floor_in = median(inside["plain"]), median(inside["verify"]), median(inside["floor"])
    one_pass = f"; pinned to one CPU {median(whole['one pass']):.2f} s" if "one pass" in whole else ""
    log(f"verify: whole process {verify:.2f} s ({spread(whole['verify'])}, {processes} processes) vs plain read "
        f"{plain:.2f} s ({spread(whole['plain'])}){one_pass}; inside one process {verify_in:.2f} s vs {plain_in:.2f} s")
    return [
        Row("verify", f"plain sqlite3 read of the same rows, whole process, {size:,} events, median of {rounds} "
                      f"({spread(whole['plain'])})", plain, "s"),
        Row("verify", f"'docket verify', whole process, in {processes} process{'es' if processes > 1 else ''} "
                      f"({usable_cpus()} usable CPUs), {size:,} events, median of {rounds} "
                      f"({spread(whole['verify'])})", verify, "s",
            ratio=plain / verify, goal=f">= {GOAL}x plain read", passed=plain / verify >= GOAL),
        Row("verify", f"  = events/s of 'docket verify' (plain read: {size / plain:,.0f} ev/s)", size / verify,
            "events/s"),
        *([Row("verify", f"(information) 'docket verify' pinned to one CPU (one pass), whole process "
                         f"({spread(whole['one pass'])})", median(whole["one pass"]), "s",
               ratio=plain / median(whole["one pass"]))] if "one pass" in whole else []),
        Row("verify", f"(information) inside one process: read_chain_rows + verify_chain vs the plain read "
                      f"({plain_in * 1000:,.0f} ms)", verify_in, "s", ratio=plain_in / verify_in),
        Row("verify", "(information) inside one process: the plain read + only the two sha256 per event",
            floor_in, "s", ratio=plain_in / floor_in),
    ]
