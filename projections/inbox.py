"""Read model: one row per worker request (stream ``request:<key>``): what it asked, and its answer.

Questions are the inbox: ``open_questions`` lists those no one has answered, across runs, and the proposed
follow-up tasks a person is to accept or refuse. Progress reports,
proposed follow-up tasks and finishes are rows too, so a task's page can show what its agent said. A refused
request counts its refusals; an answer refused (untrusted) counts on the question's row.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts
import json
from . import runs

TABLE = "requests"
COLUMNS = {"request_key": str, "kind": str, "status": str, "run_id": str, "task_id": str, "worker_id": str,
           "generation": int, "request_id": str, "asked_at": str, "reason": str, "question": str, "choices": str,
           "deadline_at": str, "on_deadline": str, "answer": str, "choice": int, "answered_by": str,
           "answered_at": str, "via": str, "delivered_at": str, "summary": str, "title": str, "decision": str, "added_task": str, "input_tokens": int,
           "output_tokens": int, "cost_micro_usd": int, "refusals": int, "answers_refused": int, "code": str,
           "position": int}
INDEXES = ("run_id", "status")
PK = "request_key"

OPEN_RUNS = frozenset({"opening", "active", "paused"})


def _insert(c: sqlite3.Connection, values: dict[str, Any]) -> None:
    names = ", ".join(values)
    c.execute(f"INSERT OR IGNORE INTO {TABLE} ({names}) VALUES ({', '.join('?' for _ in values)})",
              tuple(values.values()))


def _common(position: int, at: str, p: dict[str, Any], kind: str, status: str) -> dict[str, Any]:
    return {"request_key": p["request_key"], "kind": kind, "status": status, "run_id": p["run_id"],
            "task_id": p["task_id"], "worker_id": p["worker_id"], "generation": p["generation"],
            "request_id": p["request_id"], "asked_at": at, "refusals": 0, "answers_refused": 0, "position": position}


def _asked(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    from ..domain.kernel.canonical import canonical_json

    _insert(c, {**_common(position, at, p, "ask", "open"), "reason": p["reason"], "question": p["question"],
                "choices": canonical_json(p["choices"]).decode(), "deadline_at": p["deadline_at"],
                "on_deadline": p["on_deadline"]})


def _progress(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _insert(c, {**_common(position, at, p, "progress", "recorded"), "summary": p["summary"],
                "input_tokens": p["input_tokens"], "output_tokens": p["output_tokens"],
                "cost_micro_usd": p["cost_micro_usd"]})


def _proposed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _insert(c, {**_common(position, at, p, "propose", p["decision"]), "title": p["title"], "summary": p["prompt"],
                "decision": p["decision"]})


def _finished(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _insert(c, {**_common(position, at, p, "finish", "recorded"), "summary": p["summary"]})


def _refused(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    _insert(c, {**_common(position, at, p, p["kind"], "refused"), "code": p["code"]})
    c.execute(f"UPDATE {TABLE} SET refusals = refusals + 1 WHERE request_key = ?", (p["request_key"],))


def _answered(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE {TABLE} SET status = 'answered', answer = ?, choice = ?, answered_by = ?, answered_at = ?, "
              "via = ? WHERE request_key = ?",
              (p["answer"], p["choice"], p["answered_by"], at, p["via"], p["request_key"]))


def _expired(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE {TABLE} SET status = 'expired' WHERE request_key = ?", (p["request_key"],))


def _delivered(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE {TABLE} SET delivered_at = ? WHERE request_key = ?", (at, p["request_key"]))


def _decided(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE {TABLE} SET status = ?, decision = ?, answered_by = ?, answered_at = ?, via = ?, "
              "added_task = ? WHERE request_key = ?",
              (p["decision"], p["decision"], p["decided_by"], at, p["via"], p["task_id"], p["request_key"]))


def _task_added(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE {TABLE} SET added_task = ? WHERE request_key = ?", (p["task"]["task_id"], p["request_key"]))


def _answer_refused(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE {TABLE} SET answers_refused = answers_refused + 1 WHERE request_key = ?", (p["request_key"],))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.QuestionAsked: _asked, ev.stored.ProgressReported: _progress,
            ev.stored.FollowUpProposed: _proposed, ev.stored.WorkFinished: _finished,
            ev.stored.RequestRefused: _refused, ev.stored.QuestionAnswered: _answered,
            ev.stored.QuestionExpired: _expired, ev.stored.AnswerRefused: _answer_refused,
            ev.stored.AnswerDelivered: _delivered, ev.stored.FollowUpDecided: _decided,
            ev.stored.RunTaskAdded: _task_added}


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "choices": json.loads(row["choices"]) if row.get("choices") else []}


def open_questions(c: sqlite3.Connection, run_id: str | None = None) -> list[dict[str, Any]]:
    """Questions no one has answered, and proposed follow-ups waiting for a person's decision, of runs still open
    (of one run, or of all), oldest first."""

    where, args = ("AND run_id = ?", (run_id,)) if run_id is not None else ("", ())
    rows = as_dicts(c.execute(f"SELECT * FROM {TABLE} WHERE ((kind = 'ask' AND status = 'open') OR "
                              f"(kind = 'propose' AND status = 'queued')) {where} ORDER BY position", args))
    open_runs = {r: (runs.get_run(c, r) or {}).get("status") in OPEN_RUNS for r in {row["run_id"] for row in rows}}
    return [_decoded(r) for r in rows if open_runs[r["run_id"]]]


def requests_of(c: sqlite3.Connection, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
    """The run's requests (of one task), in the order they were made."""
    where, args = ("AND task_id = ?", (run_id, task_id)) if task_id is not None else ("", (run_id,))
    return [_decoded(r) for r in as_dicts(c.execute(
        f"SELECT * FROM {TABLE} WHERE run_id = ? {where} ORDER BY position", args))]


def request(c: sqlite3.Connection, key: str) -> dict[str, Any] | None:
    rows = as_dicts(c.execute(f"SELECT * FROM {TABLE} WHERE request_key = ?", (key,)))
    return _decoded(rows[0]) if rows else None


def waiting_workers(c: sqlite3.Connection, run_id: str) -> dict[tuple[str, int], int]:
    """(worker, generation) -> how many of its questions are open: the generations awaiting input."""
    return {(w, g): n for w, g, n in c.execute(
        f"SELECT worker_id, generation, COUNT(*) FROM {TABLE} WHERE run_id = ? AND kind = 'ask' AND status = 'open' "
        "GROUP BY worker_id, generation", (run_id,))}
