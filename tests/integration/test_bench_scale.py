"""The scale benchmark's runs end to end at a tiny size (make test does not run benchmarks).

docket go finishes every task; the CPU samples, the tasks' finish times, docket status and docket watch beside it
give every figure the benchmark prints. No time is asserted.
"""

from __future__ import annotations

from bench.scale import scale_run


def test_a_serial_run_gives_its_tenths(tmp_path):
    run = scale_run(tmp_path, 3, 1, probe=False)
    assert run.outcome == "completed" and len(run.finished_at) == 3
    assert run.cpu and run.planned_at and run.events > 3 * 10 and run.ledger_bytes > 0
    first, last = run.tenths()
    assert first > 0 and last > 0
    assert run.status_s == [] and run.watch_lag == []


def test_a_parallel_run_with_status_and_watch_beside_it(tmp_path):
    run = scale_run(tmp_path, 4, 2, probe=True, status_every_s=0.2)
    assert run.outcome == "completed" and len(run.finished_at) == 4
    assert run.status_s and run.peak_rss_mb > 0
    assert run.watch_lag and run.watch_last == run.run_positions  # watch printed the run to its last event
    first, last = run.watch_tenths()
    assert first == first and last == last  # numbers, not NaN
