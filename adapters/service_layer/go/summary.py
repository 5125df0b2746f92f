"""What a `docket go` run came to, for its summary: each task's result, cycles, checks and dropped steps, the
base's checks, the target's move, the overlaps the merge queue warned of, the commits someone other than docket put
on the target, the workers that ran unsandboxed, the connections their egress proxies refused, what its agents reported they spent, and the receipt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....domain.kernel.codes import Code
from .delivery import receipt_path
from .session import RunDriver
from ..use_cases.runs import load_run
from ..use_cases.tasks import load_task

if TYPE_CHECKING:
    from ....domain.merge_queue.integration_state import Integration
    from ....domain.run import Run

__all__ = ["run_summary"]


def run_summary(d: RunDriver, run_id: str) -> dict[str, Any]:
    from ....domain.reports.outcome import run_outcome
    from ....domain.plan import short_id
    from ....projections.checks import base_checks_of
    from ....projections.usage import spend_of_run
    from ..use_cases.candidates import load_candidate
    from ..merge_queue.integration_steps import load_integration

    run = load_run(d.ledger, run_id)
    integration = load_integration(d.ledger, run_id)
    steps = {step.task_id: step for step in integration.steps} if integration is not None else {}
    completed = integration is not None and integration.status == "completed"
    rows = []
    for task_id in (run.plan.task_ids if run.plan else ()):
        task = load_task(d.ledger, task_id)
        step = steps.get(task_id)  # its last
        code = task.finished_code
        if task.result == "passed":  # delivered only once its work reached the target
            # a step is found only in an integration
            result = "delivered" if step is not None and integration is not None and integration.delivered(step) \
                else "passed"
            if step is not None and step.status in ("conflicted", "rejected"):  # re-queued onto a moved target
                result, code = "undelivered", (Code.INTEGRATION_CONFLICT if step.status == "conflicted"
                                               else Code.INTEGRATION_REJECTED)
        else:
            result = task.result or "unfinished"
        dropped = [{"step": s.step, "status": s.status, "code": s.code, "paths": list(s.paths[:100])}
                   for s in (integration.steps if integration is not None else ()) if s.task_id == task_id
                   and s.status in ("conflicted", "rejected")]
        checks: dict[str, str] = {}
        # the candidate it finished with, else its latest (a failed task's work is shown, not "-"), else the last
        # one judged
        binding = (task.finished_binding or _latest_candidate(d, run_id, task_id)
                   or next((f.binding_id for f in reversed(task.feedback) if f.binding_id), None))
        if binding:
            for check in load_candidate(d.ledger, binding).checks:
                if check.result:
                    # a check this supervisor stopped (Ctrl-C) says nothing of the candidate: not "failed"
                    checks[check.check] = "interrupted" if check.result_code == Code.INTERRUPTED else check.result
        protected, base_tests = _protected(d, run_id, task_id, binding)
        trusted = _trusted_change(d, run, integration, task_id)
        if trusted is not None and result == "unfinished" and not trusted["approved"]:
            code = Code.CONFIG_CHANGE  # it waited for a person who did not approve it
        rows.append({"task": short_id(run_id, task_id), "task_id": task_id, "title": task.title, "result": result,
                     "cycles": len(task.feedback) + (task.result == "passed"), "candidate": binding,
                     "code": code, "checks": checks, "conflicts": dropped, "protected_changes": protected,
                     "base_tests": base_tests, "config_change": trusted})
    path = receipt_path(d.docket_dir, run_id)
    sealed = integration.receipt_sha256 if integration is not None else None
    waiting = run.waiting if run.status == "active" else None
    base = {row["check"]: {"result": row["status"], "code": row["code"], "binding_id": row["binding_id"]}
            for row in base_checks_of(d.views().conn, run_id)}
    delivered = sum(row["result"] == "delivered" for row in rows)
    # what it came to (domain/reports/outcome.py), once docket go let go of it: an open run is stopped, or waits for you
    outcome = run_outcome(run.status, delivered, len(rows), needs_you=waiting is not None, driven=False)
    return {"run_id": run_id, "status": run.status, "run_outcome": outcome.document(), "goal": run.goal,
            "target": run.target_branch,
            "limited_by": run.limited_by if run.status == "budget-limited" else None,
            "spend": spend_of_run(d.views().conn, run_id), "max_cost_micro_usd": run.max_cost_micro_usd,
            "max_tokens": run.max_tokens,
            "waiting": {"code": waiting[0], "message": waiting[1]} if waiting else None,
            "tasks": rows, "base_checks": base, "integration": integration.status if integration else None,
            "target_commit": integration.final_commit if integration is not None and (
                completed or integration.rolling) else None,
            "overlaps": _overlaps(d, run_id),
            "moved_by_others": _moved_by_others(d, run_id),
            "requeued": _requeued(d, run_id),
            "receipt_moved_by_others": _receipt_moved_by_others(d, run_id) if sealed else None,
            "unsandboxed": _unsandboxed(d, run.plan.task_ids if run.plan else ()),
            "egress_refused": _egress_refused(d, run.plan.task_ids if run.plan else ()),
            "warnings": _unchecked(integration),
            "receipt": {"sealed": sealed, "path": str(path) if path.exists() else None}}


def _latest_candidate(d: RunDriver, run_id: str, task_id: str) -> str | None:
    """The task's latest candidate that has a commit (its own work: not the merge queue's pins of merged trees nor
    the base-tests trees of its candidates), as the views know it."""
    from ....projections.candidates import candidates_of
    from ..use_cases.base_tests import BOUNDARY

    own = [c for c in candidates_of(d.views().conn, run_id, task_id) if c["commit"]
           and not (c["boundary"] or "").startswith("integration-") and c["boundary"] != BOUNDARY]
    return own[-1]["binding_id"] if own else None


def _unchecked(integration: Integration | None) -> list[dict[str, str]]:
    """no-checks when the run's integration required no check: what it delivered was not checked."""
    if integration is None or integration.required_checks:
        return []
    return [{"code": Code.NO_CHECKS, "message": "no required check judged this run's work: what it delivered was "
                                                "not checked (add a [checks.NAME] to docket.toml)"}]


def _protected(d: RunDriver, run_id: str, task_id: str, binding: str | None) -> tuple[list[str], dict[str, str]]:
    """The protected paths the task's candidate changed, as its base-tests trees (base_tests.py) set them aside, and
    each check's last result on them."""
    import json

    from ....projections.candidates import candidate_row, candidates_of
    from ..use_cases.base_tests import BOUNDARY
    from ..use_cases.candidates import load_candidate

    conn = d.views().conn
    candidate = candidate_row(conn, binding) if binding else None
    if candidate is None or not candidate["commit"]:
        return [], {}
    tested = [c for c in candidates_of(conn, run_id, task_id)
              if c["boundary"] == BOUNDARY and c["parent"] == candidate["commit"]]
    results: dict[str, str] = {}
    for c in tested:
        for check in load_candidate(d.ledger, c["binding_id"]).checks:
            if check.result:
                results[check.check] = check.result
    return sorted({p for c in tested for p in json.loads(c["changed_paths"] or "[]")}), results


def _receipt_moved_by_others(d: RunDriver, run_id: str) -> dict[str, Any] | None:
    """What the sealed receipt says of commits docket did not make on the target during the run (format 2)."""
    from ..use_cases.receipts import find_receipt

    receipt = find_receipt(d.ledger, run_id).event.receipt
    target = receipt.get("target")
    return target.get("moved_by_others") if isinstance(target, dict) else None  # type: ignore[return-value]


def _unsandboxed(d: RunDriver, task_ids: Any) -> list[dict[str, Any]]:
    """Each worker generation of the run that was launched without an enforced sandbox (sandbox = "off", or
    launched before docket had one)."""
    from ....domain import events as ev
    from ....domain import worker as worker_aggregate
    from .task import task_worker_id

    found = []
    for task_id in task_ids:
        worker_id = task_worker_id(task_id)
        for _, event in d.ledger.history(worker_aggregate.stream_of(worker_id)):
            if isinstance(event, ev.WorkerLaunchRequested) and (event.sandbox is None or not event.sandbox.enforced):
                found.append({"worker": worker_id, "generation": event.generation})
    return found


def _egress_refused(d: RunDriver, task_ids: Any) -> list[dict[str, Any]]:
    """Each worker generation of the run whose egress proxy refused connections (EgressRefused): how many, to
    which hosts."""
    from ....domain import events as ev
    from ....domain import worker as worker_aggregate
    from .task import task_worker_id

    found = []
    for task_id in task_ids:
        worker_id = task_worker_id(task_id)
        for _, event in d.ledger.history(worker_aggregate.stream_of(worker_id)):
            if isinstance(event, ev.EgressRefused):
                found.append({"worker": worker_id, "generation": event.generation, "total": event.total,
                              "refused": [r.model_dump() for r in event.refused]})
    return found


def _overlaps(d: RunDriver, run_id: str) -> list[dict[str, Any]]:
    """The overlap warnings the queue recorded (when it was prepared, and as each step was queued), one per pair of
    tasks: a repair that warns of the same pair again (either way round) adds its paths to the first warning."""
    from ....domain import events as ev
    from ....domain.merge_queue import integration as integration_aggregate

    found: dict[frozenset[str], dict[str, Any]] = {}
    for _, event in d.ledger.history(integration_aggregate.stream_of(run_id)):
        if isinstance(event, ev.IntegrationPrepared | ev.IntegrationPreparedV2 | ev.IntegrationStepQueued):
            for overlap in event.overlaps:
                warning = overlap.model_dump()
                first = found.setdefault(frozenset((overlap.first_task, overlap.second_task)), warning)
                if first is not warning:
                    first["paths"] = sorted({*first["paths"], *warning["paths"]})
                    if "whole_files" in first or "whole_files" in warning:
                        first["whole_files"] = sorted({*first.get("whole_files", ()), *warning.get("whole_files", ())})
    return list(found.values())


def _moved_by_others(d: RunDriver, run_id: str) -> list[dict[str, Any]]:
    """Each time the target was found moved by someone else (IntegrationTargetMovedByOthers): from which commit to
    which, when seen, and the commits docket did not make."""
    from ....domain import events as ev
    from ....domain.merge_queue import integration as integration_aggregate

    history = [e for _, e in d.ledger.history(integration_aggregate.stream_of(run_id))]
    onto = {(e.expected_commit, e.onto) for e in history if isinstance(e, ev.IntegrationRequeued)}
    return [{"seen": e.seen, "expected_commit": e.expected_commit, "found": e.found,
             "foreign_commits": list(e.foreign_commits), "foreign_count": e.foreign_count, "complete": e.complete,
             "keeps_expected": e.keeps_expected, "requeued": (e.expected_commit, e.found) in onto}
            for e in history if isinstance(e, ev.IntegrationTargetMovedByOthers)]


def _requeued(d: RunDriver, run_id: str) -> list[dict[str, Any]]:
    """Each time the queue went on from a target found moved (IntegrationRequeued): from which commit onto which,
    and the other docket runs that moved it (none: someone else, said by moved_by_others too)."""
    from ....domain import events as ev
    from ....domain.merge_queue import integration as integration_aggregate

    return [{"round": e.round, "expected_commit": e.expected_commit, "onto": e.onto, "moved_by": list(e.moved_by),
             "steps": list(e.requeued)}
            for _, e in d.ledger.history(integration_aggregate.stream_of(run_id))
            if isinstance(e, ev.IntegrationRequeued)]


def _trusted_change(d: RunDriver, run: Run, integration: Integration | None, task_id: str) -> dict[str, Any] | None:
    """The task's latest confirmed candidate's changes to what the run trusts (domain/containment/trust.py), and whether a
    person approved them; None when it changes nothing trusted."""
    from ....domain.containment.trust import trusted_changes
    from ....projections.approvals import confirmed_candidates
    from ..use_cases.candidates import load_candidate

    if not run.trusted_paths:
        return None
    rows = confirmed_candidates(d.views().conn, run.run_id, task_id)
    if not rows:
        return None
    binding = rows[-1]["binding_id"]
    held = trusted_changes(load_candidate(d.ledger, binding).changed_paths, run.trusted_paths)
    if not held:
        return None
    approved = integration is not None and binding in integration.approved()
    return {"binding_id": binding, "paths": list(held), "approved": approved}
