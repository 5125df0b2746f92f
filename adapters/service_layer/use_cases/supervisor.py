"""Supervising launched workers until their processes end: timeouts, stop requests, budget, lease heartbeats.

One anyio task per worker polls its process (a child of this process) and its
log's size (output resets the idle timer); its exit wakes the wait at once
(a pidfd, where the system has them), not at the next tick. Once a second it reads the ledger:
a stop asked for from another terminal (WorkerStopRequested), a run aborted or
out of budget. A stop is an intent like any other, driven by the effector (TERM
to the whole group, KILL after a grace period, until the group is positively
gone). When the process has ended, whatever it left in its group is stopped
too, and WorkerExited is recorded once, with the log's digest and tail, and the
lease released. Ledger work runs in a worker thread, one call at a time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ....domain import lease as lease_aggregate
from ....domain.kernel.errors import DocketError, Refused
from ....domain.worker import STOP_CAUSES
from ...world import faults
from ...world.clock import Clock
from ...world.files.log_cap import DEFAULT_MAX_LOG, cap_log, cut_due
from ...world.files.logs import log_size
from ..kernel.ledger import Ledger
from .runs import load_run
from .supervision import begin_supervision, end_supervision
from .usage import stop_when_spent
from .worker_generations import load_worker
from .workers import LEASE_TTL_MS, Launched, exit_worker, request_stop

if TYPE_CHECKING:
    import anyio
    from anyio.abc import TaskGroup

    from ..kernel.ports import EffectorPort, ProcessPort
    from .candidates import Pinned

__all__ = ["Ended", "Limits", "supervise"]

TICK_SECONDS = 0.05  # how soon an agent's exit is noticed: a poll and a stat, cheap
LEDGER_CHECK_SECONDS = 1.0

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    timeout_ms: int | None = None
    idle_timeout_ms: int | None = None
    max_log: int = DEFAULT_MAX_LOG  # the log's cap (log_cap.py), held while it runs and when its end is recorded


@dataclass(frozen=True)
class Ended:
    """How a supervised generation ended: result ok (exit 0), failed, or stopped by docket."""

    worker_id: str
    generation: int
    cause: str
    exit_code: int | None
    signal: int | None
    log_path: str
    stop_reason: str | None
    pinned: Pinned | None = None  # what pinning its worktree did (candidates.Pinned), if it was pinned
    pin_error: DocketError | None = None  # why it could not be pinned

    @property
    def result(self) -> str:
        if self.stop_reason is not None:
            return "stopped"
        return "ok" if self.exit_code == 0 else "failed"


class _Ledger:
    """The ledger, used from worker threads one call at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    async def call(self, fn: Callable[[], T]) -> T:
        import anyio.to_thread

        def locked() -> T:
            with self._lock:
                return fn()

        return await anyio.to_thread.run_sync(locked)


def supervise(ledger: Ledger, clock: Clock, effector: EffectorPort, workers: Sequence[tuple[Launched, Limits]], *,
              supervisions: dict[str, str] | None = None) -> list[Ended]:
    """Supervise each launched worker until its process has ended and its end is recorded.

    ``supervisions`` (run id -> supervision id) were begun by the caller before the launch; else they begin
    here. Either way they end here.
    """
    import anyio

    access = _Ledger()
    ended: list[Ended] = []

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for launched, limits in workers:
                group.start_soon(_supervise_one, ledger, clock, effector, access, launched, limits, ended, group)

    if supervisions is None:
        supervisions = begin_supervision(ledger, clock, effector.ports.processes, {w.run_id for w, _ in workers})
    try:
        anyio.run(main)
    finally:
        end_supervision(ledger, clock, supervisions)
    return ended


class ExitSignal:
    """Wakes a wait as soon as a child process ends (a Linux pidfd turns readable), instead of at the next tick;
    where there is none (an old kernel, another system, a child already reaped), the wait is a plain sleep."""

    def __init__(self, pid: int):
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    async def sleep(self, seconds: float) -> None:
        import anyio

        if self.fd is None:
            await anyio.sleep(seconds)
            return
        with anyio.move_on_after(seconds):
            await anyio.wait_readable(self.fd)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


async def _supervise_one(ledger: Ledger, clock: Clock, effector: EffectorPort, access: _Ledger, w: Launched,
                         limits: Limits, ended: list[Ended], group: TaskGroup) -> None:
    popen = w.gated.popen
    exit_signal = ExitSignal(popen.pid)
    try:
        await _supervise_until_ended(ledger, clock, effector, access, w, limits, ended, group, exit_signal)
    finally:
        exit_signal.close()
        w.close_channel()


async def _supervise_until_ended(ledger: Ledger, clock: Clock, effector: EffectorPort, access: _Ledger, w: Launched,
                                 limits: Limits, ended: list[Ended], group: TaskGroup, exit_signal: ExitSignal) -> None:
    import anyio

    processes = effector.ports.processes
    popen = w.gated.popen
    started = last_output = time.monotonic()
    last_size = 0
    next_check = started
    next_renew = started + LEASE_TTL_MS / 3000
    stop_reason: str | None = None
    stopping: anyio.Event | None = None  # the event set when the stop's outcome is recorded
    while (code := popen.poll()) is None:
        now = time.monotonic()
        size = log_size(w.log_path)
        grown = size != last_size
        if grown:
            last_output = now
        if cut_due(size, limits.max_log, quiet=not grown):  # its middle cut now, not only at the end
            await anyio.to_thread.run_sync(lambda: cap_log(w.log_path, limits.max_log))
            size = log_size(w.log_path)
        last_size = size  # a cut is not output: only growth keeps the idle timeout away
        if stop_reason is None:
            if limits.timeout_ms is not None and (now - started) * 1000 >= limits.timeout_ms:
                stop_reason = "timeout"
            elif limits.idle_timeout_ms is not None and (now - last_output) * 1000 >= limits.idle_timeout_ms:
                stop_reason = "idle-timeout"
        if stop_reason is None and now >= next_check:
            if await access.call(lambda: _awaiting_answer(ledger, clock, w)):  # its clocks stop while a person answers
                waited = now - max(next_check - LEDGER_CHECK_SECONDS, started)
                started, last_output = started + waited, last_output + waited
            next_check = now + LEDGER_CHECK_SECONDS
            stop_reason = await access.call(lambda: _asked_to_stop(ledger, clock, w))
        if now >= next_renew:
            next_renew = now + LEASE_TTL_MS / 3000
            await access.call(lambda: _renew(ledger, clock, w))
        if stop_reason is not None and stopping is None:
            stopping = anyio.Event()
            reason = stop_reason

            async def stop(done: anyio.Event = stopping) -> None:
                try:
                    await access.call(lambda: _stop(ledger, clock, effector, w, reason))
                finally:
                    done.set()

            group.start_soon(stop)  # a stop takes seconds; supervision goes on meanwhile
        await exit_signal.sleep(TICK_SECONDS)
    if stop_reason is None:  # a stop from another terminal may have ended it before this loop saw the request
        stop_reason = await access.call(lambda: _stop_requested(ledger, w))
    if stopping is not None:
        await stopping.wait()
    # it ended: what it left in its group, and every daemon it detached, is stopped before it is judged
    await anyio.to_thread.run_sync(lambda: processes.stop_tree(w.process))
    await anyio.to_thread.run_sync(lambda: _stop_adopted_by_init(processes, w))
    faults.crash_point("supervise:before-exit")
    signal = -code if code < 0 else None
    exit_code = code if code >= 0 else None
    cause = "exited" if stop_reason is None else STOP_CAUSES[stop_reason]
    await access.call(lambda: _record_end(ledger, clock, w, cause, exit_code, signal, limits.max_log))
    pinned = pin_error = None
    if w.pin_on_exit:
        faults.crash_point("supervise:before-pin")
        try:
            pinned = await access.call(lambda: _pin(ledger, clock, effector, w))
        except DocketError as e:  # the exit is recorded; a pin that cannot be made is reported, not fatal
            pin_error = e
    ended.append(Ended(w.worker_id, w.generation, cause, exit_code, signal, str(w.log_path), stop_reason,
                       pinned, pin_error))



def _asked_to_stop(ledger: Ledger, clock: Clock, w: Launched) -> str | None:
    worker = load_worker(ledger, w.worker_id)
    if worker.generation != w.generation or worker.status == "lost":
        return "fenced"  # relaunched, or given up with this host: this process's own agent stops, unrecorded
    if worker.stop_intent is not None:
        return worker.stop_reason or "requested"
    run = load_run(ledger, w.run_id)
    if run.status == "budget-limited":  # its time, cost or tokens ran out
        return "budget"
    if run.status != "active":  # paused work is stopped too: no agent works while its run's budget does not run
        return "run-stopped"
    if run.remaining_ms(clock.now()) == 0 or stop_when_spent(ledger, clock, w.run_id, run=run):
        return "budget"
    return None


def _awaiting_answer(ledger: Ledger, clock: Clock, w: Launched) -> bool:
    """Whether the generation waits for the answer to a question it asked (until the answer reaches it): its
    timeouts do not run meanwhile."""
    from .requests import apply_deadlines

    requests = getattr(w.channel, "requests", None)
    if requests is None:
        return False
    waiting = requests.waiting_questions(ledger)
    open_ones = [q.key for q in waiting if q.status == "open" and q.deadline_at is not None]
    if open_ones and apply_deadlines(ledger, clock, open_ones):
        waiting = requests.waiting_questions(ledger)
    return bool(waiting)


def _stop_requested(ledger: Ledger, w: Launched) -> str | None:
    """Why this generation was asked to stop, if it was: the request is recorded before any signal is sent."""
    worker = load_worker(ledger, w.worker_id)
    return worker.stop_reason if worker.generation == w.generation else None


def _stop(ledger: Ledger, clock: Clock, effector: EffectorPort, w: Launched, reason: str) -> None:
    if reason == "fenced":  # nothing more is recorded for it: its process group is stopped here, directly
        from ..kernel.repository_intents import STOP_GRACE_SECONDS

        effector.ports.processes.terminate_group(w.process, grace=STOP_GRACE_SECONDS)
        return
    try:
        intent_id = request_stop(ledger, clock, w.worker_id, reason, generation=w.generation)
    except Refused:
        return  # already exited
    if intent_id is not None:
        effector.run_pending(only={intent_id}, after=0)


def _stop_adopted_by_init(processes: ProcessPort, w: Launched) -> None:
    """A generation launched by a docket that died (supervised here after a resume) is not this process's
    descendant: what it detached went to init when it ended, where stop_tree cannot see it. Whatever init adopted
    that works in its workspace or its worker folder is killed before the generation is judged."""
    for identity in processes.find_orphans_in([Path(w.worktree), Path(w.log_path).parent]):
        processes.kill(identity)


def _renew(ledger: Ledger, clock: Clock, w: Launched) -> None:
    from .leases import renew_lease

    try:
        renew_lease(ledger, clock, w.resource, w.lease_token, LEASE_TTL_MS)
    except DocketError:
        pass  # a lease lost is the grant's business: it is reclaimed only once this process is positively gone


def _pin(ledger: Ledger, clock: Clock, effector: EffectorPort, w: Launched) -> Pinned:
    """Pin what the generation left in its worktree (nothing, when nothing changed)."""
    from .candidates import pin_task

    return pin_task(ledger, clock, effector, w.run_id, w.task_id, artifact_dir=w.artifact_dir,
                    worker_id=w.worker_id, generation=w.generation, max_file_size=w.max_file_size)


def _record_end(ledger: Ledger, clock: Clock, w: Launched, cause: str, exit_code: int | None,
                signal: int | None, max_log: int = DEFAULT_MAX_LOG) -> None:
    worker = load_worker(ledger, w.worker_id)
    exit_worker(ledger, clock, w.worker_id, w.generation, cause=cause, exit_code=exit_code, signal=signal,
                log_path=w.log_path, started_at=worker.launched_at, agent=w.agent, report=w.report, max_log=max_log)
    lease = ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(w.resource))
    if lease is not None and lease.token == w.lease_token and lease.status == "held":
        from .leases import release_lease

        try:
            release_lease(ledger, clock, w.resource, w.lease_token)
        except DocketError:
            pass
