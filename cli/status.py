"""docket status: runs as the ledger knows them, now or at a past point.

The fast path reads views.sqlite and the ledger with the standard library
only; the views catch up (importing more) only when they are behind.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..domain.errors import NotFound
from ..domain.values import format_duration
from .context import Context
from .output import emit, shown
from .parsing import command

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "status", status, common, "show runs as the ledger knows them",
                "docket status run-7k2m9x4q --json")
    p.add_argument("run", nargs="?", metavar="RUN", help="one run (default: every run)")
    p.add_argument("--at", metavar="POSITION|TIME", help="state as of a ledger position or an ISO-8601 time")


def status(ctx: Context) -> int:
    from ..projections import approvals, candidates, checks, integration_steps, intents, leases, runs, tasks, workers

    a = ctx.args
    ctx.require_ledger_file()
    if a.at is not None:
        views, then = ctx.views_at(a.at)
        now = then or ctx.clock.now()  # budgets as they stood then
    else:
        views, now = ctx.views(), ctx.clock.now()
    conn, position = views.conn, views.position()
    approval = _approval_required()
    if a.run:
        run = runs.get_run(conn, a.run)
        if run is None:
            raise NotFound("run-not-found", f"no run {a.run}" + (f" at {a.at}" if a.at else ""))
        doc = {
            "position": position,
            "run": runs.with_budget(run, now),
            "tasks": _with_candidates(tasks.tasks_of(conn, a.run), candidates.candidates_of(conn, a.run),
                                      checks.checks_of_run(conn, a.run)),
            "workers": [_with_process(w, now) for w in workers.workers_of(conn, a.run)],
            "leases": leases.leases_of(conn, a.run),
            "pending_intents": intents.pending(conn, a.run),
            "integration": _integration(conn, run, approval),
            "integration_steps": integration_steps.steps_of(conn, a.run),
            "approvals": approvals.approvals_of(conn, a.run),
            "base_checks": checks.base_checks_of(conn, a.run),
        }
        emit(ctx.json, doc, _human_run(doc))
    else:
        all_runs = [{**runs.with_budget(r, now), "integration": _integration(conn, r, approval)}
                    for r in runs.list_runs(conn)]
        doc = {"position": position, "runs": all_runs, "pending_intents": intents.pending(conn)}
        lines = [f"ledger position {position}; {len(all_runs)} run(s); {len(doc['pending_intents'])} pending intent(s)"]
        for r in all_runs:
            lines += [_run_line(r), *_integration_lines(r["integration"])]
        emit(ctx.json, doc, "\n".join(lines))
    return 0


def _seconds(ms: int) -> str:
    return format_duration(ms - ms % 1000)


def _run_line(r: dict[str, Any]) -> str:
    base = (r["base_commit"] or "-")[:12]
    budget = _seconds(r["used_ms"]) + (f"/{format_duration(r['budget_ms'])}" if r["budget_ms"] else "")
    return (f"{shown(r['run_id']):<16} {r['status']:<10} {shown(r['target_branch'])}@{base}  {budget}  "
            f"{shown(r['goal'])}")


def _reported(w: dict[str, Any]) -> str:
    parts = []
    if w.get("input_tokens") is not None or w.get("output_tokens") is not None:
        parts.append(f"{w.get('input_tokens') if w.get('input_tokens') is not None else '?'} tokens in, "
                     f"{w.get('output_tokens') if w.get('output_tokens') is not None else '?'} out")
    if w.get("cost_micro_usd") is not None:
        parts.append(f"${w['cost_micro_usd'] / 1_000_000:.4f}")
    if w.get("agent_turns") is not None:
        parts.append(f"{w['agent_turns']} turn(s)")
    if w.get("session_id"):
        parts.append(f"session {shown(w['session_id'])}")
    if w.get("agent_error"):
        parts.append("it reported an error")
    return ", ".join(parts)


def _human_run(doc: dict[str, Any]) -> str:
    r = doc["run"]
    lines = [_run_line(r)]
    if r["failure_code"]:
        lines.append(f"  failed: {r['failure_code']}: {shown(r['failure_message'])}")
    if r["budget_ms"]:
        lines.append(f"  budget: used {_seconds(r['used_ms'])} of {format_duration(r['budget_ms'])}, "
                     f"{_seconds(r['remaining_ms'])} left")
    lines += base_check_lines(doc["base_checks"])
    for t in doc["tasks"]:
        finished = ""
        if t.get("result"):
            cycles = t.get("cycles") or 0
            finished = f" ({t['result']}, {cycles} cycle{'' if cycles == 1 else 's'}" + \
                (f": {t['finished_code']})" if t.get("finished_code") else ")")
        elif t.get("failed_cycles"):
            finished = f" ({t['failed_cycles']} failed cycle{'' if t['failed_cycles'] == 1 else 's'} so far)"
        lines.append(f"  task {shown(t['task_id'])}: {shown(t['title'])}{finished}")
        lines += _candidate_lines(t["candidate"])
    for w in doc["workers"]:
        lines.append(f"  worker {shown(w['worker_id'])}: {shown(w['role'])} generation {w['generation']}"
                     + (f" on task {shown(w['task_id'])}" if w["task_id"] else "") + _process_part(w))
        if w.get("session_id") or w.get("input_tokens") is not None or w.get("cost_micro_usd") is not None:
            lines.append("    agent reported: " + _reported(w))
    for le in doc["leases"]:
        lines.append(f"  lease {shown(le['resource'])}: {le['status']} by {shown(le['worker_id'])} "
                     f"gen {le['generation']} token {le['token']} until {le['expires_at']}")
    for i in doc["pending_intents"]:
        lines.append(f"  pending intent {shown(i['intent_id'])} ({i['type']}) at position {i['position']}")
    lines += _integration_lines(doc["integration"])
    for step in doc["integration_steps"]:
        why = f" ({shown(step['code'])})" if step["code"] else ""
        lines.append(f"    step {step['step']}: task {shown(step['task_id'])}, candidate {step['binding_id'][:12]}: "
                     f"{step['status']}{why}")
    for approval in doc["approvals"]:
        lines.append(f"  approved by {shown(approval['by'])} at {approval['recorded_at']}: "
                     f"{approval['candidates']} candidate(s)")
    return "\n".join(lines)


def base_check_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A line for each check that fails on the run's base too (checks of the base that passed say nothing)."""
    return [f"  check {shown(row['check'])} fails on the run's base too: {row['status']}"
            + (f" ({shown(row['code'])})" if row["code"] else "") + ", before any task's change"
            for row in rows if row["status"] != "passed"]


def _approval_required() -> Callable[[], bool]:
    """Whether docket.toml requires approval, read once, and only when a candidate could await it: a status with
    nothing to approve reads no configuration at all."""
    from functools import cache

    @cache
    def required() -> bool:
        from pathlib import Path

        from ..adapters.world.config_file import approval_required

        return approval_required(Path.cwd())

    return required


def _integration(conn: Any, run: dict[str, Any], approval_required: Callable[[], bool]) -> dict[str, Any]:
    """The run's integration row, with the confirmed candidates that await approval (when approval is required and
    the queue can still be prepared: the run is open and its integration unprepared)."""
    from ..projections import approvals, integrations

    integration = integrations.integration_of(conn, run["run_id"])
    open_queue = integration["status"] == "unprepared" and run["closed_at"] is None
    unapproved = approvals.awaiting_approval(conn, run["run_id"]) if open_queue else []
    awaiting = [{k: c[k] for k in ("task_id", "binding_id", "commit")}
                for c in (unapproved if unapproved and approval_required() else [])]
    return {**integration, "awaiting_approval": awaiting}


def _integration_lines(i: dict[str, Any]) -> list[str]:
    """Nothing for a run whose integration has not begun and awaits nothing."""
    lines = []
    if i["status"] != "unprepared":
        line = f"  integration: {i['status']}, {i['steps_verified']}/{i['steps']} step(s) verified"
        if i["stopped_step"] is not None:
            line += f", stopped at step {i['stopped_step']} ({shown(i['stop_code'])})"
        elif i["target_code"] is not None and i["target"] != "completed":
            line += f", target: {shown(i['target_code'])}"
        if i["final_commit"]:
            line += f", {shown(i['target_branch'])} at {i['final_commit'][:12]}"
        if i["receipt_sha256"]:
            line += f", receipt {i['receipt_sha256'][:12]}"
        lines.append(line)
    lines += [f"  awaiting approval: task {shown(c['task_id'])} (candidate {c['binding_id'][:8]}\u2026)"
              for c in i["awaiting_approval"]]
    return lines


def _with_candidates(task_rows: list[dict[str, Any]], candidate_rows: list[dict[str, Any]],
                     check_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each task's row with its latest candidate (or None), that candidate with its check runs (every attempt).

    The changed paths themselves are left to 'docket candidate show': a status stays small however much changed.
    """
    # rows come in position order: the last one wins; the integration's own pins of merged trees
    # (boundary integration-<step>) are shown with the integration's steps, not as the task's work
    latest = {c["task_id"]: c for c in candidate_rows if not (c["boundary"] or "").startswith("integration-")}
    runs_of: dict[str, list[dict[str, Any]]] = {}
    for check in check_rows:
        runs_of.setdefault(check["binding_id"], []).append(check)
    shown_tasks = []
    for t in task_rows:
        candidate = latest.get(t["task_id"])
        if candidate is not None:
            candidate = {k: v for k, v in candidate.items() if k != "changed_paths"}
            candidate["checks"] = runs_of.get(candidate["binding_id"], [])
        shown_tasks.append({**t, "candidate": candidate})
    return shown_tasks


def _candidate_lines(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return []
    lines = [f"    candidate {c['binding_id'][:12]}: {c['status']}, commit {(c['commit'] or '-')[:12]}, "
             f"{c['changed_count']} changed path(s)"]
    latest = {check["check"]: check for check in c["checks"]}  # the last attempt of each check
    for check in latest.values():
        why = f" ({shown(check['code'])})" if check["code"] else ""
        attempt = f", attempt {check['attempt']}" if check["attempt"] > 1 else ""
        lines.append(f"      check {shown(check['check'])}: {check['status']}{why}{attempt}")
    return lines


def _with_process(w: dict[str, Any], now: str) -> dict[str, Any]:
    """A worker's row, with how long its generation has run and its last line of output (read from its log)."""
    from ..domain.values import to_ms

    started, ended = w.get("launched_at"), w.get("ended_at")
    elapsed = max(0, to_ms(ended or now) - to_ms(started)) if started else None
    last = w.get("tail_line")
    if w.get("status") == "running" and w.get("log_path"):
        last = _last_line(w["log_path"])
    return {**w, "elapsed_ms": elapsed, "last_line": last}


def _last_line(path: str) -> str | None:
    import os

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
        lines = [line for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][-200:] if lines else None


def _process_part(w: dict[str, Any]) -> str:
    status = w.get("status") or "registered"
    part = f", {status}"
    if w.get("pid"):
        part += f", pid {w['pid']}"
    if w.get("elapsed_ms") is not None:
        part += f", {_seconds(w['elapsed_ms'])}"
    if status == "exited":
        part += f" ({w.get('exit_cause')}" + (f", code {w['exit_code']}" if w.get("exit_code") is not None else "") + ")"
    if w.get("last_line"):
        part += f": {shown(w['last_line'])}"
    return part
