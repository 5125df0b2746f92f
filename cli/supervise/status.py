"""docket status: runs as the ledger knows them, now or at a past point.

The fast path reads views.sqlite and the ledger with the standard library
only; the views catch up (importing more) only when they are behind.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...domain.kernel.errors import NotFound
from ...domain.kernel.values import format_cost, format_duration
from ..console.context import Context
from ..console.output import emit, shown
from ..console.parsing import command
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...projections.query import ViewsConnection

__all__ = ["outcome_line", "register", "run_document", "runs_document", "spend_words", "with_config_changes"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "status", status, common, "show runs as the ledger knows them",
                "docket status run-7k2m9x4q --json")
    p.add_argument("run", nargs="?", metavar="RUN", help="one run (default: every run)")
    p.add_argument("--at", metavar="POSITION|TIME", help="state as of a ledger position or an ISO-8601 time")


def status(ctx: Context) -> int:
    a = ctx.args
    ctx.require_ledger_file()
    if a.at is not None:
        views, then = ctx.views_at(a.at)
        now = then or ctx.clock.now()  # budgets as they stood then
    else:
        views, now = ctx.views(), ctx.clock.now()
    conn, position = views.conn, views.position()
    if a.run:
        doc, words, current = run_document(conn, a.run, now, position, lambda: ctx.approval_required)
        if doc is None:
            raise NotFound(Code.RUN_NOT_FOUND, f"no run {a.run}" + (f" at {a.at}" if a.at else ""))
        if a.at is not None:
            doc["config_changes"] = []
        else:
            with_config_changes(ctx, doc)
        text = _human_run(doc, now, words, current)
        text += "".join(f"\n  task {shown(c['task_id'])} waits for a person: its candidate {c['binding_id'][:12]} "
                        f"changes what the run trusts ({shown(', '.join(c['paths']))}); 'docket inbox' shows the "
                        f"diff; {shown(c['approve'])}" for c in doc["config_changes"])
        emit(ctx.json, doc, text)
    else:
        doc = runs_document(conn, now, position, lambda: ctx.approval_required)
        lines = [f"ledger position {position}; {len(doc['runs'])} run(s); {len(doc['pending_intents'])} pending "
                 "intent(s)"]
        for r in doc["runs"]:
            spend = ([f"  spend: {spend_words(r['spend'], r['max_cost_micro_usd'], r['max_tokens'])}"]
                     if r["spend"]["reports"] or r["max_cost_micro_usd"] or r["max_tokens"] else [])
            lines += [_run_line(r, r["outcome"]), *_waiting_lines(r), *spend, *_attention_lines(r["attention"]),
                      *_integration_lines(r["integration"])]
        emit(ctx.json, doc, "\n".join(lines))
    return 0


def _config_changes(ctx: Context, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's candidates that wait for a person because they change what it trusts. What a run trusts is read
    from the ledger (heavy for a status): only for an open run `docket go` planned with a task whose confirmed
    candidate has not finished it, the only kind that can wait so."""
    from ...projections.inbox import OPEN_RUNS

    run = doc["run"]
    if not run.get("plan") or run.get("status") not in OPEN_RUNS or not any(
            t.get("result") is None and (t.get("candidate") or {}).get("handoff") == "confirmed"
            for t in doc["tasks"]):
        return []
    from ...adapters.service_layer.merge_queue.approval import waiting_for_a_person

    return waiting_for_a_person(ctx.ledger, ctx.views(), run["run_id"])


def with_config_changes(ctx: Context, doc: dict[str, Any]) -> dict[str, Any]:
    """The run's document with its config_changes (the candidates that wait for a person because they change what
    it trusts), and its outcome waiting for you when there are any (domain/reports/outcome.py)."""
    from ...domain.reports.outcome import run_outcome

    doc["config_changes"] = _config_changes(ctx, doc)
    if doc["config_changes"]:
        outcome = doc["outcome"]
        doc["outcome"] = run_outcome(doc["run"]["status"], outcome["delivered"], outcome["tasks"],
                                     needs_you=True).document()
    return doc


def run_document(conn: ViewsConnection, run_id: str, now: str, position: int,
                 approval_required: Callable[[], bool]) -> tuple[dict[str, Any] | None, dict[int, str], dict[str, str]]:
    """One run as `docket status RUN --json` shows it (None: no such run), with each merge step's state in words and
    the same for each task whose current step says more than its own result."""
    from ...projections import approvals, board, candidates, checks, inbox, integration_steps, intents, leases, runs, tasks, usage, workers

    run = runs.get_run(conn, run_id)
    if run is None:
        return None, {}, {}
    integration = _integration_row(conn, run)
    steps = integration_steps.steps_of(conn, run_id)
    delivered = board.delivered_steps(steps, integration)
    overlaps = board.overlap_warnings(integration)
    worker_rows = workers.workers_of(conn, run_id)
    shown_board = board.run_board(conn, run_id, now, approval_required=approval_required)
    assert shown_board is not None and shown_board.outcome is not None  # the run is there
    states = {line.task_id: line.state for line in shown_board.tasks}
    task_spend = usage.spend_by_task(conn, run_id, {w["worker_id"]: w["task_id"] for w in worker_rows})
    doc = {
        "position": position,
        "run": {**runs.with_budget(run, now), "spend": usage.spend_of_run(conn, run_id)},
        "outcome": shown_board.outcome.document(),  # what the run came to (domain/reports/outcome.py)
        "attention": list(shown_board.attention),
        "tasks": [{**t, "state": states.get(t["task_id"]),
                   "spend": task_spend.get(t["task_id"], dict(usage.NO_SPEND))}
                  for t in _with_candidates(tasks.tasks_of(conn, run_id), candidates.candidates_of(conn, run_id),
                                            checks.checks_of_run(conn, run_id))],
        "questions": inbox.open_questions(conn, run_id),
        "workers": [_with_process(w, now) for w in worker_rows],
        "leases": leases.leases_of(conn, run_id),
        "pending_intents": intents.pending(conn, run_id),
        "integration": _integration(conn, run, integration, approval_required, steps),
        "integration_steps": [{**s, "delivered": s["step"] in delivered,
                               "predicted_conflicts": json.loads(s.get("predicted_conflicts") or "[]")}
                              for s in steps],
        "approvals": approvals.approvals_of(conn, run_id),
        "base_checks": checks.base_checks_of(conn, run_id),
    }
    words = {s["step"]: board.step_words(s, integration, overlaps, delivered) for s in steps}
    current = {task_id: words[s["step"]] for task_id, s in board.current_steps(steps, worker_rows).items()
               if board.step_state(s, delivered) is not None}
    return doc, words, current


def runs_document(conn: ViewsConnection, now: str, position: int, approval_required: Callable[[], bool]) -> dict[str, Any]:
    """Every run as `docket status --json` shows them."""
    from ...projections import board, integration_steps, intents, runs, usage

    all_runs = []
    for r in runs.list_runs(conn):
        integration = _integration_row(conn, r)
        steps = integration_steps.steps_of(conn, r["run_id"])
        attention, waits = board.attention_and_wait(conn, r, integration, approval_required)
        all_runs.append({**runs.with_budget(r, now), "spend": usage.spend_of_run(conn, r["run_id"]),
                         "outcome": board.run_outcome_of(conn, r, integration, now, approval_required, steps=steps,
                                                         needs_you=waits).document(),
                         "integration": _integration(conn, r, integration, approval_required, steps),
                         "attention": attention})
    return {"position": position, "runs": all_runs, "pending_intents": intents.pending(conn)}


def _integration_row(conn: ViewsConnection, run: dict[str, Any]) -> dict[str, Any]:
    from ...projections import integrations

    return integrations.integration_of(conn, run["run_id"])


def _seconds(ms: int) -> str:
    return format_duration(ms - ms % 1000)


def outcome_line(outcome: dict[str, Any]) -> str:
    """A run's outcome as every surface words it (domain/reports/outcome.py): "partly delivered (2 of 3)", "stopped (1 of 3
    delivered)"."""
    return outcome["words"] + (f" ({outcome['detail']})" if outcome.get("detail") else "")


def _run_line(r: dict[str, Any], outcome: dict[str, Any]) -> str:
    """The run, what it came to first: ``run-1  nothing delivered  main@abc  3s  goal``, marked [needs you] when
    something of it waits for a person."""
    base = (r["base_commit"] or "-")[:12]
    budget = _seconds(r["used_ms"]) + (f"/{format_duration(r['budget_ms'])}" if r["budget_ms"] else "")
    return (f"{shown(r['run_id']):<16} {outcome_line(outcome):<17}  {shown(r['target_branch'])}@{base}  {budget}  "
            f"{shown(r['goal'])}" + ("  [needs you]" if outcome["needs_you"] else ""))


def _waiting_lines(r: dict[str, Any]) -> list[str]:
    if r["status"] != "active" or not r.get("waiting_code"):
        return []
    return [f"  waiting for you ({r['waiting_code']}): {shown(r['waiting_message'])}"]


def spend_words(spend: dict[str, Any], max_cost: int | None = None, max_tokens: int | None = None) -> str:
    """'375 tokens (321 in, 54 out) of max 1000, $0.0042 of max $2.50'; a figure no agent reported says so."""
    limits = [f"max {format_cost(max_cost)}" if max_cost else None, f"max {max_tokens} tokens" if max_tokens else None]
    if not spend["reports"]:
        shown_limits = ", ".join(limit for limit in limits if limit)
        return "nothing reported by its agents" + (f" ({shown_limits})" if shown_limits else "")
    if spend["tokens"] is None:
        tokens = "tokens not reported"
    else:
        def count(value: int | None) -> str:
            return "?" if value is None else str(value)

        tokens = f"{spend['tokens']} tokens ({count(spend['input_tokens'])} in, {count(spend['output_tokens'])} out)"
    tokens += f" of max {max_tokens}" if max_tokens else ""
    cost = "cost not reported" if spend["cost_micro_usd"] is None else format_cost(spend["cost_micro_usd"])
    cost += f" of max {format_cost(max_cost)}" if max_cost else ""
    return f"{tokens}, {cost}"


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


def _human_run(doc: dict[str, Any], now: str, step_words: dict[int, str], task_steps: dict[str, str]) -> str:
    """step_words: each step's state in words; task_steps: the same for each task whose current step says more
    than its own result."""
    from ...projections.board import overlap_lines

    r = doc["run"]
    lines = [_run_line(r, doc["outcome"]), f"  run status: {r['status']}"]
    if r["failure_code"]:
        lines.append(f"  failed: {r['failure_code']}: {shown(r['failure_message'])}")
    lines += _waiting_lines(r)
    if r["budget_ms"]:
        lines.append(f"  budget: used {_seconds(r['used_ms'])} of {format_duration(r['budget_ms'])}, "
                     f"{_seconds(r['remaining_ms'])} left")
    lines.append("  spend: " + spend_words(r["spend"], r.get("max_cost_micro_usd"), r.get("max_tokens")))
    if r["status"] == "budget-limited" and r.get("limited_by"):
        lines.append(f"  stopped: its {'time budget' if r['limited_by'] == 'time' else 'max ' + r['limited_by']} "
                     "was reached")
    lines += _attention_lines(doc["attention"])
    lines += base_check_lines(doc["base_checks"])
    for t in doc["tasks"]:
        finished = ""
        if t.get("result"):
            cycles = t.get("cycles") or 0
            finished = f" ({t['result']}, {cycles} cycle{'' if cycles == 1 else 's'}" + \
                (f": {t['finished_code']})" if t.get("finished_code") else ")")
        elif t.get("failed_cycles"):
            finished = f" ({t['failed_cycles']} failed cycle{'' if t['failed_cycles'] == 1 else 's'} so far)"
        step = f", {shown(task_steps[t['task_id']])}" if t["task_id"] in task_steps else ""
        waiting = ", awaiting input" if t.get("state") == "awaiting-input" else ""
        lines.append(f"  task {shown(t['task_id'])}: {shown(t['title'])}{finished}{step}{waiting}")
        if t["spend"]["reports"]:
            lines.append("    spend: " + spend_words(t["spend"]))
        if t.get("protected_changes"):
            lines.append("    changes protected paths: " + ", ".join(shown(p) for p in t["protected_changes"][:10])
                         + (", ..." if len(t["protected_changes"]) > 10 else ""))
        lines += _candidate_lines(t["candidate"])
    for q in doc.get("questions", []):
        if q["kind"] == "propose":
            lines.append(f"  proposal {q['request_key']} from task {shown(q['task_id'])}: a follow-up task "
                         f"{shown(q['title'])} (docket answer {q['request_key']} accept|refuse)")
            continue
        lines.append(f"  question {q['request_key']} ({q['reason']}) from task {shown(q['task_id'])}: "
                     f"{shown(q['question'])} (docket answer {q['request_key']} TEXT)")
    generation = {w["worker_id"]: w["generation"] for w in doc["workers"]}
    for w in doc["workers"]:
        lines.append(f"  worker {shown(w['worker_id'])}: {shown(w['role'])} generation {w['generation']}"
                     + (f" on task {shown(w['task_id'])}" if w["task_id"] else "") + _process_part(w)
                     + (" [unsandboxed]" if w.get("sandbox") == "off" else ""))
        if w.get("session_id") or w.get("input_tokens") is not None or w.get("cost_micro_usd") is not None:
            lines.append("    agent reported: " + _reported(w))
        if w.get("egress_refused"):
            lines.append(f"    egress refused: {w['egress_refused']} connection(s), to "
                         f"{shown(w.get('egress_hosts') or '?')}")
    for le in doc["leases"]:
        lines.append(f"  lease {shown(le['resource'])}: {_lease_words(le, now, generation.get(le['worker_id']))}")
    for i in doc["pending_intents"]:
        lines.append(f"  pending intent {shown(i['intent_id'])} ({i['type']}) at position {i['position']}")
    lines += _integration_lines(doc["integration"])
    lines += [f"    same paths: {shown(line)}" for line in overlap_lines(doc["integration"]["overlaps"])]
    for step in doc["integration_steps"]:
        lines.append(f"    step {step['step']}: task {shown(step['task_id'])}, candidate {step['binding_id'][:12]}: "
                     f"{shown(step_words[step['step']])}")
    for approval in doc["approvals"]:
        lines.append(f"  approved by {shown(approval['by'])} at {approval['recorded_at']}: "
                     f"{approval['candidates']} candidate(s)")
    return "\n".join(lines)


def _attention_lines(attention: list[str]) -> list[str]:
    return [f"  action needed: {shown(item)}" for item in attention]


def base_check_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A line for each check that fails on the run's base too (checks of the base that passed say nothing)."""
    return [f"  check {shown(row['check'])} fails on the run's base too: {row['status']}"
            + (f" ({shown(row['code'])})" if row["code"] else "") + ", before any task's change"
            for row in rows if row["status"] != "passed"]


def _lease_words(le: dict[str, Any], now: str, worker_generation: int | None) -> str:
    """Held until its expiry; past it with no release recorded, expired (the domain's rule: it may be reclaimed);
    released or expired as recorded, with no 'until' that no longer holds."""
    from ...domain.kernel.values import to_ms

    holder = f"{shown(le['worker_id'])} gen {le['generation']} token {le['token']}"
    if le["status"] == "released":
        return f"released at {le['ended_at']} by {holder}"
    if le["status"] == "expired":
        return f"expired at {le['expires_at']}, held by {holder}"
    if to_ms(now) >= to_ms(le["expires_at"]):
        return f"expired at {le['expires_at']}, held by {holder} (not released)"
    fenced = (f" (fenced: {shown(le['worker_id'])} is at generation {worker_generation})"
              if worker_generation is not None and worker_generation != le["generation"] else "")
    return f"held by {holder} until {le['expires_at']}{fenced}"


def _integration(conn: ViewsConnection, run: dict[str, Any], integration: dict[str, Any],
                 approval_required: Callable[[], bool], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's integration row, its same-path warnings as a list, the confirmed candidates that await approval
    (when approval is required and the queue can still be prepared: the run open, its integration unprepared), and
    how many tasks the target holds (delivered_tasks)."""
    from ...projections.board import awaiting_approval, delivered_tasks, overlap_warnings

    awaiting = [{k: c[k] for k in ("task_id", "binding_id", "commit")}
                for c in awaiting_approval(conn, run, integration, approval_required)]
    return {**integration, "overlaps": overlap_warnings(integration), "awaiting_approval": awaiting,
            "delivered_tasks": len(delivered_tasks(steps, integration))}


def _integration_lines(i: dict[str, Any]) -> list[str]:
    """Nothing for a run whose integration has not begun and awaits nothing."""
    from ...projections.board import integration_summary

    lines = []
    if i["status"] != "unprepared":
        line = f"  integration: {shown(integration_summary(i, i.get('delivered_tasks')))}"
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
    latest = {c["task_id"]: c for c in candidate_rows if not (c["boundary"] or "").startswith("integration-")
              and c["boundary"] != "base-tests"}  # nor the base-tests trees of its candidates (base_tests.py)
    runs_of: dict[str, list[dict[str, Any]]] = {}
    for check in check_rows:
        runs_of.setdefault(check["binding_id"], []).append(check)
    shown_tasks = []
    for t in task_rows:
        candidate = latest.get(t["task_id"])
        protected: list[str] = []
        if candidate is not None:
            # its base-tests trees (base_tests.py): their changed paths are the protected paths it changed
            tested = [c for c in candidate_rows if c["boundary"] == "base-tests" and candidate["commit"]
                      and c["parent"] == candidate["commit"] and c["task_id"] == t["task_id"]]
            protected = sorted({p for c in tested for p in json.loads(c["changed_paths"] or "[]")})
            candidate = {k: v for k, v in candidate.items() if k != "changed_paths"}
            candidate["checks"] = runs_of.get(candidate["binding_id"], [])
            candidate["base_tests"] = [run for c in tested for run in runs_of.get(c["binding_id"], [])]
        shown_tasks.append({**t, "candidate": candidate, "protected_changes": protected})
    return shown_tasks


def _candidate_lines(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return []
    handoff = f", handoff {c['handoff']}" if c.get("handoff") else ""
    if handoff and c.get("handoff_code"):
        handoff += f" ({shown(c['handoff_code'])})"
    lines = [f"    candidate {c['binding_id'][:12]}: {c['status']}, commit {(c['commit'] or '-')[:12]}, "
             f"{c['changed_count']} changed path(s){handoff}"]
    latest = {check["check"]: check for check in c["checks"]}  # the last attempt of each check
    for check in latest.values():
        attempt = f", attempt {check['attempt']}" if check["attempt"] > 1 else ""
        lines.append(f"      check {shown(check['check'])}: {_check_words(check)}{attempt}")
    for check in {check["check"]: check for check in c.get("base_tests") or []}.values():
        lines.append(f"      check {shown(check['check'])} with the base's tests: {_check_words(check)}")
    return lines


def _check_words(check: dict[str, Any]) -> str:
    """A check run's result with why, each said once: "failed (exit 3)", "timed out (idle)", "passed"."""
    status, code = check["status"], check["code"]
    if status == "failed" and code == "exit" and check["exit_code"] is not None:
        return f"failed (exit {check['exit_code']})"
    if status == "failed" and code == "signal" and check["signal"] is not None:
        return f"failed (signal {check['signal']})"
    if status == "timed-out":
        return "timed out" + (" (idle)" if code == "idle-timeout" else "")
    return status + (f" ({shown(code)})" if code and code != status else "")


def _with_process(w: dict[str, Any], now: str) -> dict[str, Any]:
    """A worker's row, with how long its generation has run and its last line of output (read from its log)."""
    from ...domain.kernel.values import to_ms

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


EXITS = {"stopped": "stopped by docket", "timeout": "stopped at its timeout",
         "idle-timeout": "stopped after its idle timeout", "budget": "stopped at the run's budget",
         "unknown": "ended (how is not known)"}


def _process_part(w: dict[str, Any]) -> str:
    status = w.get("status") or "registered"
    cause, code, signal = w.get("exit_cause"), w.get("exit_code"), w.get("exit_signal")
    if status == "exited" and cause in (None, "exited"):
        part = ", exited" + (f" with code {code}" if code is not None else "") + \
            (f" by signal {signal}" if signal is not None else "")
    elif status == "exited":
        how = [f"code {code}"] if code is not None else []
        how += [f"signal {signal}"] if signal is not None else []
        part = f", {EXITS.get(str(cause), shown(cause))}" + (f" ({', '.join(how)})" if how else "")
    elif status == "launch-failed":
        part = f", launch-failed ({shown(cause)})" if cause else ", launch-failed"
    elif status == "lost":  # WorkerLost: given up with its host, which stopped renewing its leases
        part = f", lost with host {shown(w.get('host') or '?')}"
    else:
        part = f", {status}"
    if w.get("pid"):
        part += f", pid {w['pid']}"
    if w.get("elapsed_ms") is not None:
        part += f", {_seconds(w['elapsed_ms'])}"
    if w.get("last_line"):
        part += f": {shown(w['last_line'])}"
    return part
