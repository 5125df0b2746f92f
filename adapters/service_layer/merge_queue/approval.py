"""Use case: approve a run's confirmed candidates for integration (``docket approve``).

What is approved is what the integration would merge: each task's latest
candidate with a confirmed handoff whose pin holds (of one task, or of every
task), found in the views and checked again against the ledger inside the write
transaction, so a handoff the views have not caught up with is never approved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....domain import candidate as candidate_aggregate
from ....domain.merge_queue import integration as integration_aggregate
from ....domain.kernel.errors import BadInput, NotFound
from ....domain.events import ApprovalRecorded, Event
from ....domain.kernel.names import has_unsafe_characters
from ....projections.approvals import confirmed_candidates
from ...world.clock import Clock
from ..kernel.ledger import Ledger
from ..use_cases.runs import load_run
from ..use_cases.tasks import load_task
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ....projections.views import Views

__all__ = ["MAX_APPROVER_LENGTH", "approve", "check_approver", "waiting_for_a_person"]

MAX_APPROVER_LENGTH = 200


def check_approver(by: str) -> str:
    """The approver's name as recorded; BadInput ``bad-approver`` unless it is 1 to 200 characters of visible text."""
    if not by.strip():
        raise BadInput(Code.BAD_APPROVER, "--by names who approves; it is empty")
    if has_unsafe_characters(by):
        raise BadInput(Code.BAD_APPROVER, f"--by {by[:60]!r} contains a control, bidi or invisible character")
    if len(by) > MAX_APPROVER_LENGTH:
        raise BadInput(Code.BAD_APPROVER, f"--by is {len(by)} characters long; at most {MAX_APPROVER_LENGTH}")
    return by


def approve(ledger: Ledger, clock: Clock, views: Views, run_id: str, task_id: str | None, by: str) -> ApprovalRecorded:
    """ApprovalRecorded by ``by`` of the run's confirmed candidates (of task_id's only, when given).

    Refused ``nothing-to-approve`` when there is none, ``integration-prepared`` once the queue is fixed (an
    approval then changes nothing), ``run-closed`` for a closed run; NotFound for an unknown run or task."""
    by = check_approver(by)
    load_run(ledger, run_id)
    if task_id is not None and load_task(ledger, task_id).run_id != run_id:
        raise NotFound(Code.TASK_NOT_FOUND, f"run {run_id} has no task {task_id}")
    found = [row["binding_id"] for row in confirmed_candidates(views.conn, run_id, task_id)]

    def decision(now: str) -> list[Event]:
        chosen = []
        for binding in found:
            candidate = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
            if candidate is not None and candidate.handoff == "confirmed" and candidate.status == "pinned":
                assert candidate.commit is not None
                chosen.append((candidate.task_id, candidate.binding_id, candidate.commit))
        existing = ledger.get(integration_aggregate.apply, integration_aggregate.stream_of(run_id))
        return integration_aggregate.record_approval(existing, load_run(ledger, run_id), by=by, candidates=chosen,
                                                     now=now)

    ((_, recorded),) = ledger.decide(decision, clock.now())
    assert isinstance(recorded, ApprovalRecorded)
    return recorded


def waiting_for_a_person(ledger: Ledger, views: Views, run_id: str | None = None, *,
                         with_diff: bool = False) -> list[dict[str, Any]]:
    """The confirmed candidates of open runs (of one run) that change a path their run trusts (domain/containment/trust.py) and
    that no approval names yet: each waits for a person's 'docket approve' before the merge queue takes it. With
    with_diff, each carries the diff of those paths, read from its repository."""
    from pathlib import Path

    from ....domain.containment.trust import trusted_changes
    from ....projections.inbox import OPEN_RUNS
    from ....projections.runs import list_runs
    from ...world.git.trees import files_diff
    from ..use_cases.base_tests import protected_paths_of

    found = []
    runs = [r["run_id"] for r in list_runs(views.conn) if r.get("status") in OPEN_RUNS
            and (run_id is None or r["run_id"] == run_id)]
    for rid in runs:
        run = load_run(ledger, rid)
        if not run.trusted_paths:
            continue
        integration = ledger.get(integration_aggregate.apply, integration_aggregate.stream_of(rid))
        approved = integration.approved() if integration is not None else frozenset()
        for row in confirmed_candidates(views.conn, rid):
            candidate = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(row["binding_id"]))
            if candidate is None or candidate.binding_id in approved or candidate.commit is None:
                continue
            held = trusted_changes(candidate.changed_paths, run.trusted_paths)
            if not held:
                continue
            entry = {"run_id": rid, "task_id": candidate.task_id, "binding_id": candidate.binding_id,
                     "commit": candidate.commit, "paths": list(held),
                     # the tests it changed: the base's ran on its code too (base_tests.py)
                     "protected_changes": protected_paths_of(views.conn, rid, candidate.task_id, candidate.commit),
                     "approve": f"docket approve {rid} --task {candidate.task_id} --by NAME"}
            if with_diff:
                try:
                    entry["diff"] = files_diff(Path(candidate.repository), candidate.base, candidate.commit,
                                               list(held))
                except (KeyError, OSError):
                    entry["diff"] = None
            found.append(entry)
    return found
