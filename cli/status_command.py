"""docket status: runs as the ledger knows them, now or at a past point.

The fast path opens views.sqlite and the ledger with the standard library
only; projections catch up (importing more) only when the views are behind.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..domain.errors import NotFound
from ..domain.values import format_duration
from ..projections import intents, leases, runs, tasks, workers
from .context import Context
from .output import emit, shown


def _fresh_views(ctx: Context) -> sqlite3.Connection | None:
    """views.sqlite if it already reflects the ledger's head, else None."""
    if not ctx.paths.views.exists():
        return None
    ledger = ctx.read_ledger()
    try:
        views = sqlite3.connect(f"file:{ctx.paths.views}?mode=ro", uri=True, timeout=30)
        meta = dict(views.execute("SELECT key, value FROM projection_position").fetchall())
        from ..projections.views import schema_signature

        if meta.get("schema") != schema_signature():
            return None
        head = ledger.execute("SELECT position, digest FROM chain ORDER BY position DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    if head is None or (str(head[0]), head[1]) != (meta.get("position"), meta.get("digest")):
        views.close()
        return None
    return views


def _views_at(ctx: Context, at: str) -> tuple[sqlite3.Connection, str]:
    """Views rebuilt in memory up to a position or time, and the ledger's time there."""
    import json

    from ..adapters.projector import catch_up, open_views
    from ..domain.values import parse_position, parse_time

    views = open_views(":memory:")
    ledger = ctx.read_ledger()
    if at.isascii() and at.isdigit():
        from ..adapters.reader import head_position

        if (until := parse_position(at)) > (head := head_position(ledger)):
            raise NotFound("position-not-found", f"position {at} is past the end of the ledger ({head})")
        position = catch_up(ledger, views, until=until)
        row = ledger.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()
        return views.conn, json.loads(row[0])["recorded_at"] if row else ctx.clock.now()
    moment = parse_time(at)
    catch_up(ledger, views, until_time=moment)
    return views.conn, moment


def status(ctx: Context) -> int:
    a = ctx.args
    ctx.require_ledger_file()
    if a.at is not None:
        conn, now = _views_at(ctx, a.at)  # budgets as they stood then
    else:
        conn, now = _fresh_views(ctx) or ctx.views().conn, ctx.clock.now()
    position = int(conn.execute("SELECT value FROM projection_position WHERE key = 'position'").fetchone()[0])
    if a.run:
        run = runs.get_run(conn, a.run)
        if run is None:
            raise NotFound("run-not-found", f"no run {a.run}" + (f" at {a.at}" if a.at else ""))
        doc = {
            "position": position,
            "run": runs.with_budget(run, now),
            "tasks": tasks.tasks_of(conn, a.run),
            "workers": workers.workers_of(conn, a.run),
            "leases": leases.leases_of(conn, a.run),
            "pending_intents": intents.pending(conn, a.run),
        }
        emit(ctx.json, doc, _human_run(doc))
    else:
        all_runs = [runs.with_budget(r, now) for r in runs.list_runs(conn)]
        doc = {"position": position, "runs": all_runs, "pending_intents": intents.pending(conn)}
        lines = [f"ledger position {position}; {len(all_runs)} run(s); {len(doc['pending_intents'])} pending intent(s)"]
        lines += [_run_line(r) for r in all_runs]
        emit(ctx.json, doc, "\n".join(lines))
    return 0


def _seconds(ms: int) -> str:
    return format_duration(ms - ms % 1000)


def _run_line(r: dict[str, Any]) -> str:
    base = (r["base_commit"] or "-")[:12]
    budget = _seconds(r["used_ms"]) + (f"/{format_duration(r['budget_ms'])}" if r["budget_ms"] else "")
    return (f"{shown(r['run_id']):<16} {r['status']:<10} {shown(r['target_branch'])}@{base}  {budget}  "
            f"{shown(r['goal'])}")


def _human_run(doc: dict[str, Any]) -> str:
    r = doc["run"]
    lines = [_run_line(r)]
    if r["failure_code"]:
        lines.append(f"  failed: {r['failure_code']}: {shown(r['failure_message'])}")
    if r["budget_ms"]:
        lines.append(f"  budget: used {_seconds(r['used_ms'])} of {format_duration(r['budget_ms'])}, "
                     f"{_seconds(r['remaining_ms'])} left")
    for t in doc["tasks"]:
        lines.append(f"  task {shown(t['task_id'])}: {shown(t['title'])}")
    for w in doc["workers"]:
        lines.append(f"  worker {shown(w['worker_id'])}: {shown(w['role'])} generation {w['generation']}"
                     + (f" on task {shown(w['task_id'])}" if w["task_id"] else ""))
    for le in doc["leases"]:
        lines.append(f"  lease {shown(le['resource'])}: {le['status']} by {shown(le['worker_id'])} "
                     f"gen {le['generation']} token {le['token']} until {le['expires_at']}")
    for i in doc["pending_intents"]:
        lines.append(f"  pending intent {shown(i['intent_id'])} ({i['type']}) at position {i['position']}")
    return "\n".join(lines)
