"""6. streams: a command on a long stream costs what it costs on a short one.

``lease renew`` (the heartbeat that makes long streams) as a use case in one
process, on 10-event lease streams and on a 10,000-event lease stream of the
same ledger, interleaved in blocks so a slow moment hits both. Each short
stream is renewed once (so it stays about 10 events long); the long one is
renewed as often. Streams are folded from their snapshot (every
``SNAPSHOT_EVERY`` versions), so the long stream's cost should not grow.
"""

from __future__ import annotations

from docket.adapters.service_layer.use_cases.leases import grant_lease, renew_lease
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.runs import open_run
from docket.adapters.service_layer.use_cases.worker_generations import register_worker
from docket.adapters.world.clock import FixedClock
from docket.domain import events as ev
from docket.domain.kernel.streams import lease_stream
from docket.domain.kernel.values import from_ms, to_ms

from .common import Row, log, median, remove, temp_dir, timed

GOAL = 1.2
T0 = "2026-01-01T00:00:00.000Z"


def _build(path, short_streams: int, long_events: int) -> tuple[Ledger, FixedClock, dict[str, int]]:
    ledger = Ledger(path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    open_run(ledger, clock, run_id="r1", intent_id="i1", goal="g", target_branch="main", budget_ms=None,
             repository="/bench/.git", wait=False)  # no repository: the run stays "opening"
    register_worker(ledger, clock, "r1", "w1", "implementer", None)
    tokens = {}
    for name, length in [("long", long_events), *((f"short/{i}", 10) for i in range(short_streams))]:
        tokens[name] = grant_lease(ledger, clock, name, "w1", 1, 3_600_000).last[0]
        renewals = [ev.LeaseRenewed(stream=lease_stream(name), version=v, recorded_at=clock.now(), resource=name,
                                    run_id="r1", token=tokens[name], expires_at=from_ms(to_ms(clock.now()) + 3_600_000))
                    for v in range(2, length + 1)]
        for start in range(0, len(renewals), 1_000):
            ledger.append(renewals[start:start + 1_000])
    return ledger, clock, tokens


def run(quick: bool) -> list[Row]:
    blocks, per_block = (5, 10) if quick else (10, 20)
    long_events = 2_000 if quick else 10_000
    folder = temp_dir()
    try:
        ledger, clock, tokens = _build(folder / "streams.sqlite", blocks * per_block, long_events)
        renew_lease(ledger, clock, "long", tokens["long"], 3_600_000)  # warm-up: its first snapshot
        short_t, long_t = [], []
        shorts = iter(range(blocks * per_block))
        for _ in range(blocks):
            for _ in range(per_block):
                name = f"short/{next(shorts)}"
                short_t.append(timed(lambda: renew_lease(ledger, clock, name, tokens[name], 3_600_000)))
            for _ in range(per_block):
                long_t.append(timed(lambda: renew_lease(ledger, clock, "long", tokens["long"], 3_600_000)))
        ledger.close()
    finally:
        remove(folder)
    s, l_ = median(short_t), median(long_t)
    log(f"streams: renew on 10 events {s * 1000:.2f} ms, on {long_events:,} events {l_ * 1000:.2f} ms")
    return [
        Row("streams", f"'lease renew' use case, 10-event stream, median of {len(short_t)}", s * 1000, "ms"),
        Row("streams", f"'lease renew' use case, {long_events:,}-event stream, median of {len(long_t)}", l_ * 1000,
            "ms", ratio=l_ / s, goal=f"<= {GOAL}x the short stream", passed=l_ / s <= GOAL),
    ]
