"""4. status: ``docket status`` as a whole process on a large ledger.

The ledger is the cached mixed ledger of 1,000,000 events (200 runs, each
opened, base-pinned and, but for the last, completed). Any views file is
removed first, so one warm-up call builds ``<stem>.views.sqlite`` beside it
from the whole ledger (timed and reported too); then ten timed calls take
the fast path (views current: no catch-up) and print every run, taking turns
with ten runs of ``python -c pass``, the floor any Python CLI pays (so a busy
moment of the machine hits both alike); the ratio is status against that floor.
"""

from __future__ import annotations

import sys

from .common import BIN, Row, cached_ledger, interleaved, log, median, run_process, spread

GOAL = 0.3
RUNS = 10


def run(quick: bool) -> list[Row]:
    size = 200_000 if quick else 1_000_000
    path = cached_ledger(size)
    for views in path.parent.glob(path.stem + ".views.sqlite*"):
        views.unlink()  # so the warm-up call really builds the views from the whole ledger
    status = [str(BIN / "docket"), "status", "--ledger", str(path)]
    warm = run_process(status)
    log(f"status warm-up (builds the views): {warm:.2f} s")
    times = interleaved({"status": lambda: run_process(status),
                         "python": lambda: run_process([sys.executable, "-c", "pass"])}, RUNS)
    s, p = median(times["status"]), median(times["python"])
    log(f"status: {s:.3f} s ({spread(times['status'])}); python -c pass {p:.3f} s ({spread(times['python'])})")
    return [
        Row("status", f"'python -c pass' (floor), median of {RUNS} ({spread(times['python'])})", p, "s"),
        Row("status", f"'docket status', {size:,} events, median of {RUNS}, in turns with the floor "
                      f"({spread(times['status'])})", s, "s",
            ratio=s / p, goal=f"< {GOAL} s", passed=s < GOAL),
        Row("status", f"first 'docket status' (builds the views: {size / warm:,.0f} ev/s)", warm, "s"),
    ]
