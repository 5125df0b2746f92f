"""Read model: one row per step of a run's merge queue, made by IntegrationPrepared (the first one fixes the queue).

``status`` follows the Integration aggregate's steps: waiting, merging (its
intent is pending), merged, verified, or what stopped the queue there:
conflicted, failed or rejected (with ``code`` and ``message``; in a queue that
goes on, conflicted and rejected steps are dropped and the queue went on), or
requeued (verified, then queued again onto a moved target, or merged after a batch's rejected step: its copy
follows). ``batch`` names the steps one check run verified together (``[integration] batch``: "first..last", the
check ran on the last one's merge); ``bisect`` what a failed batch check said of a merged step while the batch is
bisected; ``predicted_conflicts`` the paths a queued step was foreseen to conflict on, merged onto the
integration tip as it was queued (JSON; IntegrationStepQueued); ``speculation`` what the queue's speculation
did with a merged step (``[integration] speculate``: checked on its range's merge while steps ahead were checked,
or that check cancelled by a step ahead that did not pass). ``merge`` says
whether the step made a merge commit (merged) or found its candidate in the
head's history already (already-merged); ``result`` whether the integration ref
was moved now (created) or found moved (observed).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "integration_steps"
COLUMNS = {"run_id": str, "step": int, "task_id": str, "binding_id": str, "commit": str, "worker_id": str,
           "generation": int, "status": str, "intent_id": str, "head": str, "merge_commit": str, "tree": str,
           "merge": str, "result": str, "verification_binding": str, "checks": str, "check": str, "code": str,
           "message": str, "paths": str, "ended_at": str, "position": int, "batch": str, "bisect": str,
           "predicted_conflicts": str, "speculation": str}
PK = ("run_id", "step")


def _prepared(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.executemany("INSERT OR IGNORE INTO integration_steps (run_id, step, task_id, binding_id, [commit], worker_id, "
                  "generation, status, position) VALUES (?, ?, ?, ?, ?, ?, ?, 'waiting', ?)",
                  [(p["run_id"], number, s["task_id"], s["binding_id"], s["commit"], s["worker_id"], s["generation"],
                    position) for number, s in enumerate(p["steps"], start=1)])


def _queued(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """A step appended to a queue that goes on (IntegrationPrepared v2), with the paths it was foreseen to conflict
    on (JSON; NULL when none was)."""
    from ..domain.kernel.canonical import canonical_json

    foreseen = p.get("predicted_conflicts") or None  # absent in ledgers written before the prediction
    c.execute("INSERT OR IGNORE INTO integration_steps (run_id, step, task_id, binding_id, [commit], worker_id, "
              "generation, status, position, predicted_conflicts) VALUES (?, ?, ?, ?, ?, ?, ?, 'waiting', ?, ?)",
              (p["run_id"], p["step"], p["task_id"], p["binding_id"], p["commit"], p["worker_id"], p["generation"],
               position, canonical_json(foreseen).decode() if foreseen else None))


def _requeued(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """Verified steps queued again onto a moved target: settled as requeued, their copies appended, waiting."""
    for n, step in enumerate(p["requeued"]):
        row = c.execute("SELECT task_id, binding_id, [commit], worker_id, generation FROM integration_steps "
                        "WHERE run_id = ? AND step = ?", (p["run_id"], step)).fetchone()
        c.execute("UPDATE integration_steps SET status = 'requeued', ended_at = ? WHERE run_id = ? AND step = ?",
                  (at, p["run_id"], step))
        if row is not None:
            c.execute("INSERT OR IGNORE INTO integration_steps (run_id, step, task_id, binding_id, [commit], "
                      "worker_id, generation, status, position) VALUES (?, ?, ?, ?, ?, ?, ?, 'waiting', ?)",
                      (p["run_id"], p["first_step"] + n, *row, position))


def _set(c: sqlite3.Connection, p: dict[str, Any], assignments: str, values: tuple[Any, ...]) -> None:
    c.execute(f"UPDATE integration_steps SET {assignments} WHERE run_id = ? AND step = ?",
              (*values, p["run_id"], p["step"]))


def _requested(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _set(c, p, "status = 'merging', intent_id = ?, head = ?, merge_commit = ?, tree = ?, merge = ?",
         (p["intent_id"], p["head"], p["merge_commit"], p["tree"], p["merge"]))


def _merged(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _set(c, p, "status = 'merged', intent_id = NULL, merge_commit = ?, tree = ?, merge = ?, result = ?",
         (p["merge_commit"], p["tree"], p["merge"], p["result"]))


def _failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _set(c, p, "status = 'failed', intent_id = NULL, code = ?, message = ?, ended_at = ?",
         (p["code"], p["message"], at))


def _conflicted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    _set(c, p, "status = 'conflicted', head = ?, code = ?, message = ?, paths = ?, ended_at = ?",
         (p["head"], p["reason"], p["message"], canonical_json(p["paths"]).decode(), at))


def _verified(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    _set(c, p, "status = 'verified', verification_binding = ?, checks = ?, ended_at = ?",
         (p["verification_binding"], canonical_json(p["checks"]).decode(), at))


def _rejected(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE integration_steps SET bisect = NULL WHERE run_id = ?", (p["run_id"],))  # the culprit is found
    _set(c, p, "status = 'rejected', verification_binding = ?, [check] = ?, code = ?, message = ?, ended_at = ?",
         (p["verification_binding"], p["check"], p["code"], p["message"], at))


def _batch_verified(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    c.execute("UPDATE integration_steps SET status = 'verified', verification_binding = ?, checks = ?, ended_at = ?, "
              "batch = ?, bisect = NULL WHERE run_id = ? AND step BETWEEN ? AND ? AND status = 'merged'",
              (p["verification_binding"], canonical_json(p["checks"]).decode(), at,
               f"{p['first_step']}..{p['last_step']}", p["run_id"], p["first_step"], p["last_step"]))


def _batch_failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE integration_steps SET bisect = ? WHERE run_id = ? AND step BETWEEN ? AND ? AND status = 'merged'",
              (f"check {p['check']} failed on steps {p['first_step']}..{p['last_step']} together: bisecting",
               p["run_id"], p["first_step"], p["last_step"]))


def _verification_started(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """[integration] speculate: a merged step's check started, on the merge of its range, maybe before the steps
    ahead of it are verified."""
    ahead = p["assumed"]
    assumed = (f", assuming step{'s' if len(ahead) > 1 else ''} {', '.join(map(str, ahead[:10]))}"
               f"{' and more' if len(ahead) > 10 else ''} ahead pass" if ahead else "")
    scope = (f"steps {p['first_step']}..{p['last_step']}" if p["first_step"] != p["last_step"]
             else f"step {p['last_step']}")
    c.execute("UPDATE integration_steps SET speculation = ? WHERE run_id = ? AND step BETWEEN ? AND ? "
              "AND status = 'merged'", (f"checking on the merge of {scope}{assumed}", p["run_id"],
                                        p["first_step"], p["last_step"]))


def _verification_cancelled(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE integration_steps SET speculation = ? WHERE run_id = ? AND step BETWEEN ? AND ?",
              (f"its check was cancelled: step {p['because_of']} ahead of it did not pass; checked again on the new "
               "head", p["run_id"], p["first_step"], p["last_step"]))


def _cancelled(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """A step intent given up on ('docket reconcile --cancel'): the step waits again."""
    c.execute("UPDATE integration_steps SET status = 'waiting', intent_id = NULL WHERE intent_id = ?",
              (p["intent_id"],))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.IntegrationPrepared: _prepared, ev.stored.IntegrationPreparedV2: _prepared,
            ev.stored.IntegrationStepQueued: _queued, ev.stored.IntegrationStepRequested: _requested,
            ev.stored.IntegrationStepRequestedV2: _requested,
            ev.stored.IntegrationStepMerged: _merged, ev.stored.IntegrationStepFailed: _failed,
            ev.stored.IntegrationStepConflicted: _conflicted, ev.stored.IntegrationStepVerified: _verified,
            ev.stored.IntegrationStepRejected: _rejected, ev.stored.IntentCancelled: _cancelled,
            ev.stored.IntegrationRequeued: _requeued, ev.stored.IntegrationBatchRequeued: _requeued,
            ev.stored.IntegrationBatchVerified: _batch_verified,
            ev.stored.IntegrationBatchFailed: _batch_failed,
            ev.stored.IntegrationVerificationStarted: _verification_started,
            ev.stored.IntegrationVerificationCancelled: _verification_cancelled}


def steps_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The run's queue, in step order."""
    return as_dicts(c.execute("SELECT * FROM integration_steps WHERE run_id = ? ORDER BY step", (run_id,)))
