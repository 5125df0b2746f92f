"""Read model: one row per run's integration (stream ``integration:<run>``), from its first approval or preparation.

``status`` follows the Integration aggregate (domain/merge_queue/integration.py): unprepared,
merging, verifying, updating-target, completed or stopped. The step counts it
rests on are kept from the events themselves: ``steps_merged`` (merged, waiting
for re-verification) and ``steps_verified``; ``stopped_step`` names the step that
stopped the queue. ``overlaps`` is the JSON list of the same-path warnings
IntegrationPrepared recorded; ``target_code`` and ``target_message`` what the
last IntegrationTargetMoved said. Each step has its own row in
integration_steps, each approval in approvals.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "integrations"
COLUMNS = {"run_id": str, "status": str, "prepared": int, "repository": str, "target_branch": str,
           "target_ref": str, "expected_commit": str, "integration_ref": str, "steps": int, "steps_merged": int,
           "steps_verified": int, "stopped_step": int, "stop_code": str, "target": str, "target_intent": str,
           "target_code": str, "target_message": str, "overlaps": str, "final_commit": str, "final_tree": str,
           "approvals": int, "receipt_sha256": str, "sealed_at": str, "sealed_position": int, "prepared_at": str,
           "ended_at": str, "position": int, "rolling": int, "closed": int, "steps_dropped": int, "target_behind": int}
PK = "run_id"

# a queue that goes on (IntegrationPrepared v2): dropped steps are settled, the target moves as steps are verified
_ROLLING = ("WHEN rolling = 1 THEN CASE WHEN target = 'moved' OR stopped_step IS NOT NULL THEN 'stopped' "
            "WHEN target = 'requested' THEN 'updating-target' WHEN steps_merged > 0 THEN 'verifying' "
            "WHEN steps_verified + steps_dropped < steps THEN 'merging' "
            "WHEN target_behind = 1 THEN 'updating-target' "
            "WHEN closed = 0 THEN 'open' WHEN final_commit IS NOT NULL THEN 'completed' ELSE 'stopped' END ")
_STATUS = ("CASE WHEN prepared = 0 THEN 'unprepared' " + _ROLLING + "WHEN target = 'completed' THEN 'completed' "
           "WHEN target = 'moved' OR stopped_step IS NOT NULL THEN 'stopped' "
           "WHEN target = 'requested' THEN 'updating-target' WHEN steps_merged > 0 THEN 'verifying' "
           "WHEN steps_verified >= steps THEN 'updating-target' ELSE 'merging' END")


def _update(c: sqlite3.Connection, position: int, run_id: str, assignments: str, values: tuple[Any, ...]) -> None:
    """Make the run's row if this is its first event, change it, then settle its status from what it holds."""
    c.execute("INSERT OR IGNORE INTO integrations (run_id, status, prepared, steps, steps_merged, steps_verified, "
              "approvals, position) VALUES (?, 'unprepared', 0, 0, 0, 0, 0, ?)", (run_id, position))
    c.execute(f"UPDATE integrations SET {assignments} WHERE run_id = ?", (*values, run_id))
    c.execute(f"UPDATE integrations SET status = {_STATUS} WHERE run_id = ?", (run_id,))


def _approved(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "approvals = approvals + 1", ())


def _prepared(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    fields = ("repository", "target_branch", "target_ref", "expected_commit", "integration_ref")
    first = "CASE WHEN prepared = 0 THEN ? ELSE {0} END"  # the first IntegrationPrepared fixes the queue
    _update(c, position, p["run_id"],
            ", ".join(f"{name} = {first.format(name)}" for name in (*fields, "steps", "overlaps", "prepared_at"))
            + ", prepared = 1",
            (*(p[name] for name in fields), len(p["steps"]), canonical_json(p["overlaps"]).decode(), at))


def _prepared_v2(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _prepared(c, position, at, p)
    _update(c, position, p["run_id"], "rolling = 1, closed = 0, steps_dropped = 0, target_behind = 0", ())


def _queued(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "steps = steps + 1", ())


def _closed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "closed = 1", ())


def _rolling(c: sqlite3.Connection, run_id: str) -> bool:
    row = c.execute("SELECT rolling FROM integrations WHERE run_id = ?", (run_id,)).fetchone()
    return bool(row and row[0])


def _merged(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "steps_merged = steps_merged + 1", ())


def _verified(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "steps_merged = MAX(steps_merged - 1, 0), steps_verified = steps_verified + 1"
            + (", target_behind = 1" if _rolling(c, p["run_id"]) else ""), ())


def _batch_verified(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """Steps first..last verified by one check run ([integration] batch)."""
    n = len(p["tasks"])
    _update(c, position, p["run_id"], "steps_merged = MAX(steps_merged - ?, 0), steps_verified = steps_verified + ?"
            + (", target_behind = 1" if _rolling(c, p["run_id"]) else ""), (n, n))


def _batch_requeued(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """The steps merged after a batch's rejected step: settled (as dropped ones are), their copies queued."""
    n = len(p["requeued"])
    _update(c, position, p["run_id"], "steps = steps + ?, steps_merged = MAX(steps_merged - ?, 0), "
                                      "steps_dropped = steps_dropped + ?", (n, n, n))


def _stopped(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """Conflicted, failed or rejected: the queue stops at this step."""
    code = p.get("code", p.get("reason"))
    rejected = "steps_merged = MAX(steps_merged - 1, 0), " if "verification_binding" in p else ""
    if "found" not in p and _rolling(c, p["run_id"]):  # conflicted or rejected: dropped, the queue goes on
        _update(c, position, p["run_id"], f"{rejected}steps_dropped = steps_dropped + 1", ())
        return
    _update(c, position, p["run_id"], f"{rejected}stopped_step = ?, stop_code = ?, ended_at = ?",
            (p["step"], code, at))


def _target_requested(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "target = 'requested', target_intent = ?", (p["intent_id"],))


def _completed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    if _rolling(c, p["run_id"]):  # one move of several
        _update(c, position, p["run_id"], "target = NULL, target_intent = NULL, target_behind = 0, final_commit = ?, "
                                          "final_tree = ?", (p["commit"], p["tree"]))
        return
    _update(c, position, p["run_id"], "target = 'completed', target_intent = NULL, final_commit = ?, final_tree = ?, "
                                      "ended_at = ?", (p["commit"], p["tree"], at))


def _target_moved(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    if p["code"] == "target-checked-out":  # nothing wrong with the queue: the target is asked again once switched away
        _update(c, position, p["run_id"], "target = NULL, target_intent = NULL, target_code = ?, target_message = ?",
                (p["code"], p["message"]))
    else:
        _update(c, position, p["run_id"], "target = 'moved', target_intent = NULL, target_code = ?, "
                                          "target_message = ?, ended_at = ?", (p["code"], p["message"], at))


def _requeued(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """The queue went on from the moved target: the verified steps it queued again are steps once more."""
    _update(c, position, p["run_id"], "steps = steps + ?, target = NULL, target_intent = NULL, target_code = NULL, "
                                      "target_message = NULL, ended_at = NULL, target_behind = 0",
            (len(p["requeued"]),))


def _sealed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _update(c, position, p["run_id"], "receipt_sha256 = COALESCE(receipt_sha256, ?), sealed_at = COALESCE(sealed_at, "
                                      "?), sealed_position = COALESCE(sealed_position, ?)",  # sealed once
            (p["receipt_sha256"], at, position))


def _cancelled(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    """A target intent given up on ('docket reconcile --cancel'): the target is unrequested again."""
    row = c.execute("SELECT run_id FROM integrations WHERE target_intent = ?", (p["intent_id"],)).fetchone()
    if row is not None:
        _update(c, position, row[0], "target = NULL, target_intent = NULL", ())


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.ApprovalRecorded: _approved, ev.stored.IntegrationPrepared: _prepared,
            ev.stored.IntegrationPreparedV2: _prepared_v2, ev.stored.IntegrationStepQueued: _queued,
            ev.stored.IntegrationQueueClosed: _closed,
            ev.stored.IntegrationStepMerged: _merged, ev.stored.IntegrationStepVerified: _verified,
            ev.stored.IntegrationStepConflicted: _stopped, ev.stored.IntegrationStepFailed: _stopped,
            ev.stored.IntegrationStepRejected: _stopped,
            ev.stored.IntegrationTargetRequested: _target_requested,
            ev.stored.IntegrationTargetRequestedV2: _target_requested,
            ev.stored.IntegrationTargetRequestedV3: _target_requested,
            ev.stored.IntegrationCompleted: _completed, ev.stored.IntegrationTargetMoved: _target_moved,
            ev.stored.ReceiptSealed: _sealed, ev.stored.IntentCancelled: _cancelled,
            ev.stored.IntegrationRequeued: _requeued, ev.stored.IntegrationBatchVerified: _batch_verified,
            ev.stored.IntegrationBatchRequeued: _batch_requeued}


def integration_of(c: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The run's integration; a run with nothing recorded about it yet is unprepared, with no steps."""
    rows = as_dicts(c.execute("SELECT * FROM integrations WHERE run_id = ?", (run_id,)))
    if rows:
        return rows[0]
    return {**dict.fromkeys(COLUMNS), "run_id": run_id, "status": "unprepared", "prepared": 0, "steps": 0,
            "steps_merged": 0, "steps_verified": 0, "approvals": 0}


def all_integrations(c: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Every run's integration that has a row, by run id."""
    return {row["run_id"]: row for row in as_dicts(c.execute("SELECT * FROM integrations ORDER BY position"))}
