"""Fold decision results into state, as the ledger would (positions counted here)."""

from __future__ import annotations

from docket.domain import lease, run, task, worker
from docket.domain.containment.processes import ProcessIdentity
from docket.domain.kernel.values import from_ms, to_ms

SUPERVISOR = ProcessIdentity(host="h", boot_id="b", pid=7, pgid=7, start_time="1")
T0 = "2026-01-01T00:00:00.000Z"
COMMIT = "a" * 40


def at(ms: int) -> str:
    return from_ms(to_ms(T0) + ms)


class Book:
    """A tiny in-memory ledger: applies events and hands out positions."""

    def __init__(self):
        self.position = 1  # LedgerCreated

    def apply(self, apply, state, events):
        for event in events if isinstance(events, list) else [events]:
            self.position += 1
            state = apply(state, event, self.position)
        return state

    def active_run(self, run_id="r1", budget_ms=None, now=T0, supervised=False):
        """An active run; supervised: a docket process supervises it from now, so its budget's clock runs."""
        r = self.apply(run.apply, None, run.open_run(run_id, "i1", "goal", "main", budget_ms, "/repo/.git", now))
        r = self.apply(run.apply, r, run.record_base_pin(r, "i1", now, commit=COMMIT))
        if supervised:
            r = self.apply(run.apply, r, run.supervised(r, "s1", SUPERVISOR, now))
        return r

    def worker(self, r, worker_id="w1", now=T0):
        return self.apply(worker.apply, None, worker.register(None, r, worker_id, "implementer", None, None, now))

    def task(self, r, task_id="t1", now=T0):
        return self.apply(task.apply, None, task.plan(None, r, task_id, "title", now))

    def lease(self, current, holder, w, r, resource="wt/a", ttl=60_000, now=T0):
        return self.apply(lease.apply, current, lease.grant(current, holder, w, w.generation, r, resource, ttl, now))
