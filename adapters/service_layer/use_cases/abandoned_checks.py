"""Check runs no docket process runs any more, finished: those the views list, or those the caller names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ....domain import check as candidate_check
from ....domain.events import Event
from ....projections.query import ViewsConnection
from ...world.clock import Clock
from .candidates import load_candidate
from .checks import STOP_GRACE_SECONDS, remove_execution
from ..kernel.ledger import Ledger

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["settle_abandoned_checks", "settle_checks"]


def settle_abandoned_checks(ledger: Ledger, clock: Clock, effector: EffectorPort, views: ViewsConnection, *,
                            stop_orphans: bool, driving: tuple[str, str] | None = None) -> list[dict[str, str]]:
    """Finish each unfinished check run of the views that nobody runs any more; what was done to each. driving:
    (run id, this host) when the caller drives that run (settle_checks)."""
    from ....projections import checks

    unfinished = [(row["binding_id"], row["check_id"]) for row in checks.unfinished(views)]
    if not unfinished:
        return []
    done = settle_checks(ledger, clock, effector, unfinished, stop_orphans=stop_orphans, driving=driving)
    return [{"check_id": check_id, "done": what} for check_id, what in done]


def settle_checks(ledger: Ledger, clock: Clock, effector: EffectorPort, unfinished: Sequence[tuple[str, str]], *,
                  stop_orphans: bool, driving: tuple[str, str] | None = None) -> list[tuple[str, str]]:
    """Finish check runs (binding, check id) that no live docket process is running any more.

    A run whose process is positively gone, or never started, is recorded as
    interrupted; with stop_orphans, a run whose process still lives but whose
    supervising docket is gone has its group stopped first. Every finished run's
    execution is then removed. Returns (check id, what was done) for each.

    driving (run id, this host): the caller drives that run, its driver lease taken over from another host whose
    hold expired. A run of that run's checks on another host was that driver's: its result would never be taken, so
    it is recorded as interrupted (lost) and runs again here; its execution is left to its own host.
    """
    processes = effector.ports.processes
    done = []
    for binding, check_id in unfinished:
        candidate = load_candidate(ledger, binding)
        run = candidate.check_run(check_id)
        what = []
        if driving is not None and candidate.run_id == driving[0] and run.execution_intent is not None:

            def given_up(now: str) -> list[Event]:
                return candidate_check.lose_execution(load_candidate(ledger, binding), check_id, here=driving[1],
                                                      now=now)

            if ledger.decide(given_up, clock.now()):
                what.append(f"its execution on host {run.host} given up")
                run = load_candidate(ledger, binding).check_run(check_id)
        if run.execution_intent is not None or run.launch_intent is not None or run.removal_intent is not None:
            continue  # its intent is pending: the effector settles it first
        elsewhere = (driving is not None and candidate.run_id == driving[0] and run.process is not None
                     and run.process.host != driving[1])
        if run.result is None:
            process = run.process
            liveness: str = "none" if process is None else processes.group_liveness(process)
            if liveness == "alive" and process is not None and stop_orphans and run.supervisor is not None \
                    and processes.liveness(run.supervisor) == "dead":
                liveness = processes.terminate_group(process, grace=STOP_GRACE_SECONDS)
                what.append("stopped its process group")
            if elsewhere and liveness == "unknown":
                liveness = "lost"
            if liveness not in ("dead", "none", "lost"):
                continue

            def decision(now: str, liveness: str = liveness) -> list[Event]:
                return candidate_check.interrupted(load_candidate(ledger, binding), check_id,
                                                   "lost" if liveness == "lost" else "dead", now)

            if ledger.decide(decision, clock.now()):
                what.append("recorded as interrupted" + (f" (lost with host {run.process.host})"
                                                         if liveness == "lost" and run.process else ""))
        run = load_candidate(ledger, binding).check_run(check_id)
        if elsewhere:
            pass  # another host's execution: removed there (docket reconcile on that host), never from here
        elif run.result is not None and run.execution_state in ("ready", "requested"):
            what.append(f"execution {remove_execution(ledger, clock, effector, binding, check_id)}")
        if what:
            done.append((check_id, ", ".join(what)))
    return done
