"""Use cases of a run: open it (its base pinned), pause, resume, abort or complete it; and the run as it stands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....domain import run as run_aggregate
from ....domain.kernel.errors import NotFound, OutcomeUnknown, Refused
from ....domain.events import Event
from ...world import faults
from ...world.clock import Clock
from ..kernel.appended import Appended, record
from ..kernel.ledger import Ledger
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["abort_run", "complete_run", "load_run", "open_run", "pause_run", "resume_run"]


def load_run(ledger: Ledger, run_id: str) -> run_aggregate.Run:
    run = ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id))
    if run is None:
        raise NotFound(Code.RUN_NOT_FOUND, f"no run {run_id}")
    return run


def open_run(ledger: Ledger, clock: Clock, *, run_id: str, intent_id: str, goal: str, target_branch: str,
             budget_ms: int | None, repository: str, wait: bool = True,
             effector: EffectorPort | None = None, remote: str | None = None, max_cost_micro_usd: int | None = None,
             max_tokens: int | None = None) -> run_aggregate.Run:
    """Record the run and its base-pin intent; with wait, drive that intent to its outcome. The run as it then stands.
    remote: the name of the shared git remote ([git] remote) the run's base, candidates and target are on.
    max_cost_micro_usd, max_tokens: the run's limits on what its agents report they used (None: none).

    Raises BadInput (unknown-remote) for a remote the repository does not name, NotFound (unknown-branch) or
    Refused when the base could not be pinned, and OutcomeUnknown when, waiting, the pin's outcome is not known yet.
    """
    on_remote = None if remote is None else shared_remote(repository, remote)

    def decision(now: str) -> list[Event]:
        if ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id)) is not None:
            raise Refused(Code.RUN_EXISTS, f"run {run_id} already exists")
        return run_aggregate.open_run(run_id, intent_id, goal, target_branch, budget_ms, repository, now,
                                      remote=on_remote, max_cost_micro_usd=max_cost_micro_usd, max_tokens=max_tokens)

    intent_position, _ = record(ledger, clock, decision).last
    faults.crash_point("run-open:after-intent")
    if wait:  # its own intent, found by its position: another's unknown holds it not back
        if effector is None:
            from ..kernel.effector import Effector

            effector = Effector(ledger, clock)
        effector.run_pending(only={intent_id}, after=intent_position - 1)
    run = load_run(ledger, run_id)
    if run.status == "failed":

        failed = NotFound if run.failure_code == Code.UNKNOWN_BRANCH else Refused
        raise failed(run.failure_code or "base-pin-failed", run.failure_message or "the base could not be pinned")
    if wait and intent_id in run.pending_intents:
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"run {run_id} is recorded but its base pin is not known yet; "
                                                "'docket replay --apply' observes again")
    return run


def shared_remote(repository: str, remote: str) -> tuple[str, str]:
    """(name, URL as recorded: any password taken out) of the repository's remote; BadInput unknown-remote."""
    from pathlib import Path

    from ....domain.kernel.errors import BadInput
    from ...world.git.remote import redacted_url, remote_url

    try:
        return remote, redacted_url(remote_url(Path(repository), remote))
    except (ValueError, OSError) as e:
        raise BadInput(Code.UNKNOWN_REMOTE, f"[git] remote names {remote!r}: {e}") from None


def pause_run(ledger: Ledger, clock: Clock, run_id: str, reason: str | None) -> Appended:
    return record(ledger, clock, lambda now: run_aggregate.pause(load_run(ledger, run_id), reason, now))


def resume_run(ledger: Ledger, clock: Clock, run_id: str) -> Appended:
    return record(ledger, clock, lambda now: run_aggregate.resume(load_run(ledger, run_id), now))


def abort_run(ledger: Ledger, clock: Clock, run_id: str, reason: str) -> Appended:
    return record(ledger, clock, lambda now: run_aggregate.abort(load_run(ledger, run_id), reason, now))


def complete_run(ledger: Ledger, clock: Clock, run_id: str) -> Appended:
    return record(ledger, clock, lambda now: run_aggregate.complete(load_run(ledger, run_id), now))
