"""Use case: the merge queue's verifications kept in flight (``[integration] speculate``), a thread each.

The decisions are the domain's (domain/merge_queue/speculation.py): which ranges of merged steps start, which are
stale. Here each started range's required checks run in a thread of its own, through a ledger connection of its
own (``open_session``), while the integrator goes on merging, starting and recording verdicts in queue order.
The integrator records a verdict only once the range's thread has ended; it then finds every result recorded on
the range's candidate and runs nothing again (``probe_turn`` makes sure no check of a candidate runs twice at
once, also when a thread of an earlier pass still runs). A stale range is recorded cancelled first, then its
checks are stopped (``checks.cancel_checks``). After a crash, a range recorded running has no thread: one is
started for it, and its candidate's recorded results are reused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ....domain.merge_queue import speculation as rules
from ....domain.events import Event
from ....domain.merge_queue.integration_state import Integration, StepState
from ...world import faults
from ...world.clock import Clock
from ..kernel.ledger import Ledger
from ..use_cases.checks import CheckSpec, cancel_checks
from .integration_steps import check_probe, load_integration, pin_probe

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["Connection", "Speculation"]


class Connection(Protocol):
    """A ledger connection for one thread (go's Session)."""

    @property
    def ledger(self) -> Ledger: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def effector(self) -> EffectorPort: ...

    @property
    def close(self) -> Callable[[], None]: ...


@dataclass
class Speculation:
    """The verifications one driver of a run keeps in flight: at most ``speculate`` at once, each in a thread with
    its own connection from ``open_session``."""

    open_session: Callable[[], Connection]
    speculate: int
    threads: dict[str, threading.Thread] = field(default_factory=dict)  # candidate binding -> its checks' thread
    wake: threading.Event = field(default_factory=threading.Event)  # set when a thread ends
    lock: threading.Lock = field(default_factory=threading.Lock)

    def busy(self, binding: str) -> bool:
        with self.lock:
            thread = self.threads.get(binding)
        return thread is not None and thread.is_alive()

    def wait(self, seconds: float) -> None:
        """Until a thread ends, or seconds pass."""
        self.wake.wait(seconds)
        self.wake.clear()

    def start(self, ledger: Ledger, clock: Clock, effector: EffectorPort, integration: Integration,
              scope: rules.Range, checks: Sequence[CheckSpec], **where: object) -> bool:
        """Pin the range's merged tree, record its verification started, and run its checks in a thread; whether it
        was recorded now (not when the queue moved on meanwhile)."""
        probe = tuple(integration.step(n) for n in range(scope.first, scope.last + 1))
        candidate = pin_probe(ledger, clock, effector, integration, probe)
        last = probe[-1]
        merge_commit, tree = last.merge_commit, last.tree
        assert merge_commit is not None and tree is not None

        def decision(now: str) -> list[Event]:
            current = load_integration(ledger, integration.run_id)
            assert current is not None
            return rules.start(current, scope, verification_binding=candidate.binding_id,
                               merge_commit=merge_commit, tree=tree, now=now)

        if not ledger.decide(decision, clock.now()):
            return False
        faults.crash_point("integrate:after-speculation-started")
        self.run(integration.run_id, candidate.binding_id, probe, checks, **where)
        return True

    def resume(self, integration: Integration, checks: Sequence[CheckSpec], **where: object) -> None:
        """A thread for each verification recorded running that has none here (started before a crash, or by an
        earlier pass of another driver object)."""
        for v in integration.running():
            with self.lock:
                known = v.binding_id in self.threads
            if not known:
                probe = tuple(integration.step(n) for n in range(v.first, v.last + 1))
                self.run(integration.run_id, v.binding_id, probe, checks, **where)

    def run(self, run_id: str, binding: str, probe: tuple[StepState, ...], checks: Sequence[CheckSpec],
            **where: object) -> None:
        with self.lock:
            if binding in self.threads and self.threads[binding].is_alive():
                return
            thread = threading.Thread(target=self._checks, args=(run_id, binding, probe, checks, where),
                                      name=f"docket-verify-{run_id}-{probe[-1].step}", daemon=True)
            self.threads[binding] = thread
        thread.start()

    def _checks(self, run_id: str, binding: str, probe: tuple[StepState, ...], checks: Sequence[CheckSpec],
                where: dict[str, object]) -> None:
        try:
            s = self.open_session()
            try:
                integration = load_integration(s.ledger, run_id)
                assert integration is not None
                check_probe(s.ledger, s.clock, s.effector, integration, probe, binding, checks, **where)  # type: ignore[arg-type]
            finally:
                s.close()
        except BaseException:  # noqa: BLE001 - the integrator checks the range itself once this ends, and says why
            pass
        finally:
            self.wake.set()

    def cancel_stale(self, ledger: Ledger, clock: Clock, run_id: str) -> bool:
        """Record every stale verification cancelled and stop its checks; whether any was."""
        recorded = ledger.decide(lambda now: rules.cancel(_current(ledger, run_id), now), clock.now())
        if not recorded:
            return False
        for _, event in recorded:
            cancel_checks(event.verification_binding, event.message)  # type: ignore[attr-defined]
        return True

    def close(self) -> None:
        """Wait for every thread (their checks stop with the run's supervisor, or end)."""
        with self.lock:
            threads = list(self.threads.values())
        for thread in threads:
            thread.join()


def _current(ledger: Ledger, run_id: str) -> Integration:
    integration = load_integration(ledger, run_id)
    assert integration is not None
    return integration

