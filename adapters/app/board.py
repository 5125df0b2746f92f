"""The board: a run as its live view shows it, one line per task in plan order, derived from the views alone.

Each task's state is the furthest thing the views say about it:

- integrated: its step of the merge queue was verified;
- passed, failed: TaskFinished;
- stopped: the run closed (aborted, budget-limited, failed) before the task finished;
- checking: its candidate is being pinned, or a check runs on it;
- launching, running: its worker's current generation;
- queued: the current generation was judged and failed (feedback recorded), or nothing has started and nothing
  it depends on is unfinished;
- exited: the generation ended, and nothing has judged it yet;
- waiting: something it depends on (the run's plan) has not passed yet.

Strings are the ledger's exact text (and a running worker's last line of output as its log holds it): a renderer
escapes them for a terminal.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ...domain.values import to_ms
from ...projections import candidates, checks, integration_steps, integrations, runs, tasks, workers

__all__ = ["CLOSED", "Board", "TaskLine", "last_output_line", "run_board"]

CLOSED = frozenset({"completed", "aborted", "budget-limited", "failed"})
TAIL_BYTES = 4096
LINE_CHARS = 200


@dataclass(frozen=True)
class TaskLine:
    task_id: str
    title: str
    state: str
    generation: int | None  # the worker's current generation (None: never registered)
    elapsed_ms: int | None  # how long that generation's process ran, or has run until now
    last_line: str | None  # its last non-blank line of output
    cycles: int | None  # generations judged: failed ones, and the one that finished the task
    candidate: str | None  # the task's latest candidate, short
    checks: str | None  # its checks' latest attempts, e.g. "1/2 passed, 1 running"
    depends_on: tuple[str, ...]
    step: str | None  # its step in the merge queue, if it has one


@dataclass(frozen=True)
class Board:
    run_id: str
    goal: str
    status: str
    closed: bool
    target_branch: str
    budget_ms: int | None
    used_ms: int
    remaining_ms: int | None
    integration: str  # the integration's status, with its verified steps when it has begun
    target_commit: str | None  # where integration moved the target
    receipt_sealed: bool
    receipt_sha256: str | None
    tasks: tuple[TaskLine, ...]

    def document(self) -> dict[str, Any]:
        return asdict(self) | {"tasks": [asdict(t) | {"depends_on": list(t.depends_on)} for t in self.tasks]}


def run_board(conn: sqlite3.Connection, run_id: str, now: str, *,
              tail: Callable[[str], str | None] | None = None) -> Board | None:
    """The run's board as of now from the views' tables (None: no such run). ``tail(log_path)`` reads a running
    worker's last line of output (default: last_output_line)."""
    run = runs.get_run(conn, run_id)
    if run is None:
        return None
    run = runs.with_budget(run, now)
    closed = run["status"] in CLOSED
    depends = {t["task_id"]: tuple(t.get("depends_on") or ()) for t in json.loads(run["plan"] or "{}").get("tasks", [])}
    task_rows = tasks.tasks_of(conn, run_id)
    results = {t["task_id"]: t["result"] for t in task_rows}
    worker_of = {w["task_id"]: w for w in workers.workers_of(conn, run_id) if w["task_id"]}  # the last one wins
    latest = {c["task_id"]: c for c in candidates.candidates_of(conn, run_id)
              if not (c["boundary"] or "").startswith("integration-")}  # the queue's own pins are not a task's work
    checks_by = _latest_checks(checks.checks_of_run(conn, run_id))
    step_of = {s["task_id"]: s["status"] for s in integration_steps.steps_of(conn, run_id)}
    lines = []
    for t in task_rows:
        task_id = t["task_id"]
        worker, candidate = worker_of.get(task_id), latest.get(task_id)
        binding = t["passed_candidate"] or (candidate["binding_id"] if candidate else None)
        candidate_checks = checks_by.get(binding, []) if binding else []
        state = _state(t, worker, candidate, candidate_checks, step_of.get(task_id), closed,
                       [d for d in depends.get(task_id, ()) if results.get(d) != "passed"])
        lines.append(TaskLine(
            task_id=task_id, title=t["title"], state=state, generation=worker["generation"] if worker else None,
            elapsed_ms=_elapsed(worker, now), last_line=_last_line(worker, tail or last_output_line),
            cycles=t["cycles"] if t["cycles"] is not None else t["failed_cycles"], candidate=binding[:12] if binding
            else None, checks=_checks_summary(candidate_checks), depends_on=depends.get(task_id, ()),
            step=step_of.get(task_id)))
    integration = integrations.integration_of(conn, run_id)
    shown_integration = integration["status"]
    if integration["prepared"]:
        shown_integration += f" {integration['steps_verified']}/{integration['steps']}"
    return Board(run_id=run_id, goal=run["goal"], status=run["status"], closed=closed,
                 target_branch=run["target_branch"], budget_ms=run["budget_ms"], used_ms=run["used_ms"],
                 remaining_ms=run["remaining_ms"], integration=shown_integration,
                 target_commit=integration["final_commit"], receipt_sealed=integration["receipt_sha256"] is not None,
                 receipt_sha256=integration["receipt_sha256"], tasks=tuple(lines))


def _state(task: dict[str, Any], worker: dict[str, Any] | None, candidate: dict[str, Any] | None,
           candidate_checks: list[dict[str, Any]], step: str | None, run_closed: bool, unfinished: list[str]) -> str:
    if step == "verified":
        return "integrated"
    if task["result"]:
        return task["result"]
    if run_closed:
        return "stopped"
    generation = worker["generation"] if worker else None
    pinning = candidate is not None and candidate["generation"] == generation and candidate["status"] == "pinning"
    if pinning or any(c["status"] in ("requested", "running") for c in candidate_checks):
        return "checking"
    if worker is None:
        return "waiting" if unfinished else "queued"
    if worker["status"] in ("registered", "launching"):
        return "launching"
    if worker["status"] == "running":
        return "running"
    if task["judged_generation"] == worker["generation"]:
        return "queued"  # this generation was judged and failed: the next one waits for its turn
    return "exited"


def _latest_checks(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each candidate's checks, the latest attempt of each (rows come in position order: the last one wins)."""
    by_binding: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_binding.setdefault(row["binding_id"], {})[row["check"]] = row
    return {binding: list(named.values()) for binding, named in by_binding.items()}


def _checks_summary(rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    counts: dict[str, int] = {}
    for row in rows:
        status = "running" if row["status"] == "requested" else row["status"]
        counts[status] = counts.get(status, 0) + 1
    parts = [f"{counts.pop('passed', 0)}/{len(rows)} passed"]
    return ", ".join(parts + [f"{n} {status}" for status, n in sorted(counts.items())])


def _elapsed(worker: dict[str, Any] | None, now: str) -> int | None:
    if worker is None or not worker["launched_at"]:
        return None
    return max(0, to_ms(worker["ended_at"] or now) - to_ms(worker["launched_at"]))


def _last_line(worker: dict[str, Any] | None, tail: Callable[[str], str | None]) -> str | None:
    if worker is None:
        return None
    if worker["status"] == "running" and worker["log_path"]:
        return tail(worker["log_path"]) or worker["tail_line"]
    return worker["tail_line"]


def last_output_line(path: str) -> str | None:
    """The last non-blank line in the last 4 KiB of a log (its last 200 characters), never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device in its place is not read
            return None
        data = os.pread(fd, TAIL_BYTES, max(0, info.st_size - TAIL_BYTES))
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][-LINE_CHARS:] if lines else None
