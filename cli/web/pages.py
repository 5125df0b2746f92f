"""The pages of `docket serve`, rendered server-side from what `docket status` and `docket inbox` read.

Every text from the ledger is shown as the terminal would show it (controls made visible) and HTML-escaped; no
page holds a script of its own (the one script is a file, app.js, and the Content-Security-Policy forbids any
other). Each page is a <main> inside one layout; app.js swaps the <main> for a fresh one when the ledger moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from ...domain.values import format_cost, format_duration, to_ms
from ..output import shown

__all__ = ["block", "inbox_page", "layout", "not_found", "run_page", "runs_page", "text"]


def text(value: object) -> str:
    """A value as a page shows it: controls and invisible characters visible, then HTML-escaped."""
    return escape(shown("" if value is None else value), quote=True)


def block(value: object) -> str:
    """Text of several lines (an output's tail, a prompt): each line as text() shows it, the line breaks kept."""
    return "\n".join(text(line) for line in str("" if value is None else value).split("\n"))


def _first_lines(value: str, count: int = 200) -> str:
    lines = value.split("\n")
    return "\n".join(lines[:count] + ([f"... {len(lines) - count} more line(s): docket inbox --json"]
                                       if len(lines) > count else []))


def layout(title: str, main: str, csrf: str) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"docket-csrf\" content=\"{escape(csrf)}\">"
            f"<title>{text(title)} · docket</title><link rel=\"stylesheet\" href=\"/static/style.css\">"
            "<link rel=\"icon\" href=\"/static/icon.svg\" type=\"image/svg+xml\">"
            "<script src=\"/static/app.js\" defer></script></head><body>"
            "<header><a class=\"brand\" href=\"/\">docket</a><nav><a href=\"/\">runs</a> "
            "<a href=\"/inbox\">inbox</a></nav><span id=\"live\" class=\"live\">live</span></header>"
            "<p id=\"notice\" role=\"status\" hidden></p>"
            f"{main}</body></html>")


def _main(position: int, body: str) -> str:
    return f"<main data-position=\"{position}\">{body}</main>"


def _duration(ms: int | None) -> str:
    return "-" if ms is None else format_duration(ms - ms % 1000)


def _spend(spend: dict[str, Any]) -> str:
    if not spend.get("reports"):
        return "-"
    parts = []
    if spend.get("tokens") is not None:
        parts.append(f"{spend['tokens']} tokens")
    if spend.get("cost_micro_usd") is not None:
        parts.append(format_cost(spend["cost_micro_usd"]))
    return ", ".join(parts) or "-"


def _outcome(outcome: dict[str, Any]) -> str:
    """What the run came to, in the words every surface uses (domain/outcome.py), coloured by it (not by the run's
    status: a completed run that delivered nothing is no success), and the needs-you marker when something of it
    waits for a person."""
    state = escape(str(outcome["state"]))
    words = text(outcome["words"] + (f" ({outcome['detail']})" if outcome.get("detail") else ""))
    marker = " <a class=\"needs-you\" href=\"/inbox\">needs you</a>" if outcome["needs_you"] else ""
    return f"<span class=\"outcome {state}\">{words}</span>{marker}"


def _status(r: dict[str, Any]) -> str:
    """The run's status as the ledger says it, beside its outcome."""
    status = "waiting" if r["status"] == "active" and r.get("waiting_code") else r["status"]
    return f"<span class=\"status {escape(status)}\">{escape(status)}</span>"


def runs_page(doc: dict[str, Any], now: str) -> str:
    rows = []
    for r in reversed(doc["runs"]):
        budget = _duration(r["used_ms"]) + (f" of {format_duration(r['budget_ms'])}" if r["budget_ms"] else "")
        limits = ", ".join(x for x in (f"max {format_cost(r['max_cost_micro_usd'])}" if r.get("max_cost_micro_usd")
                                       else "", f"max {r['max_tokens']} tokens" if r.get("max_tokens") else "") if x)
        ended = r.get("closed_at") or now
        duration = max(0, to_ms(ended) - to_ms(r["opened_at"])) if r.get("opened_at") else None
        needs = " class=\"needs-you\"" if r["outcome"]["needs_you"] else ""
        rows.append(f"<tr data-run=\"{text(r['run_id'])}\"{needs}><td><a href=\"/runs/{text(r['run_id'])}\">"
                    f"{text(r['run_id'])}</a></td><td>{_outcome(r['outcome'])}</td><td>{_status(r)}</td>"
                    f"<td class=\"goal\">{text(r['goal'])}</td>"
                    f"<td>{text(r['target_branch'])}</td><td>{budget}</td>"
                    f"<td>{_spend(r['spend'])}{' (' + limits + ')' if limits else ''}</td>"
                    f"<td>{text(r.get('opened_at'))}</td><td>{_duration(duration)}</td></tr>")
    table = ("<table class=\"runs\"><thead><tr><th>run</th><th>outcome</th><th>status</th><th>goal</th><th>target</th>"
             "<th>budget used</th><th>spend</th><th>started</th><th>duration</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>") if rows else "<p class=\"empty\">no runs yet</p>"
    return _main(doc["position"], f"<h1>runs</h1>{table}")


def _task_rows(doc: dict[str, Any], feedback: dict[str, list[dict[str, Any]]], task_steps: dict[str, str]) -> str:
    rows = []
    for t in doc["tasks"]:
        state = t.get("state") or t.get("result") or "planned"
        reasons = "".join(f"<li>generation {f['generation']}: <code>{text(f['code'])}</code>"
                          f"{' (' + text(f['check']) + ')' if f.get('check') else ''}</li>"
                          for f in feedback.get(t["task_id"], []))
        said = task_steps.get(t["task_id"])
        step = f" <span class=\"step\">{text(said)}</span>" if said and said != state else ""
        rows.append(f"<tr data-task=\"{text(t['task_id'])}\"><td>{text(t['task_id'])}</td>"
                    f"<td class=\"title\">{text(t['title'])}</td>"
                    f"<td><span class=\"state {escape(str(state))}\">{text(state)}</span>{step}</td>"
                    f"<td>{t.get('cycles') or 0}</td><td><ul class=\"reasons\">{reasons}</ul></td></tr>")
    return ("<table class=\"tasks\"><thead><tr><th>task</th><th>title</th><th>state</th><th>cycles</th>"
            "<th>failed generations</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _egress(w: dict[str, Any]) -> str:
    """What its egress proxy refused (EgressRefused), under its status."""
    if not w.get("egress_refused"):
        return ""
    return (f"<br><span class=\"egress\">egress refused: {int(w['egress_refused'])} connection(s), to "
            f"{text(w.get('egress_hosts') or '?')}</span>")


def _worker_rows(doc: dict[str, Any], tails: dict[str, str]) -> str:
    rows = []
    for w in doc["workers"]:
        if w.get("role") == "supervisor":
            continue
        tail = tails.get(w["worker_id"]) or w.get("last_line") or ""
        rows.append(f"<tr><td>{text(w['worker_id'])}</td><td>{w['generation']}</td>"
                    f"<td>{text(w.get('status') or 'registered')}{_egress(w)}</td>"
                    f"<td>{_duration(w.get('elapsed_ms'))}</td>"
                    f"<td><pre class=\"tail\">{block(tail)}</pre></td></tr>")
    return ("<table class=\"workers\"><thead><tr><th>worker</th><th>generation</th><th>status</th><th>time</th>"
            "<th>last output</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _check_rows(checks: list[dict[str, Any]]) -> str:
    rows = []
    for c in checks:
        result = c.get("result") or c.get("status") or "running"
        rows.append(f"<tr class=\"check {escape(str(result))}\"><td>{text(c.get('task_id'))}</td>"
                    f"<td>{text(c.get('check'))}</td><td>{text(result)}</td>"
                    f"<td><pre class=\"tail\">{block(c.get('tail') or '')}</pre></td></tr>")
    if not rows:
        return "<p class=\"empty\">no checks yet</p>"
    return ("<table class=\"checks\"><thead><tr><th>task</th><th>check</th><th>result</th><th>tail</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>")


def _step_rows(doc: dict[str, Any], words: dict[int, str]) -> str:
    rows = [f"<tr><td>{s['step']}</td><td>{text(s['task_id'])}</td><td>{text(words.get(s['step'], s['status']))}"
            f"</td><td><code>{text((s.get('merge_commit') or '')[:12])}</code></td></tr>"
            for s in doc["integration_steps"]]
    if not rows:
        return "<p class=\"empty\">nothing queued yet</p>"
    return ("<table class=\"steps\"><thead><tr><th>step</th><th>task</th><th>state</th><th>merge</th></tr></thead>"
            "<tbody>" + "".join(rows) + "</tbody></table>")


def _receipt(run_id: str, receipt: dict[str, Any] | None) -> str:
    if receipt is None:
        return "<p class=\"empty\">not sealed yet</p>"
    return (f"<p>sealed: <code>{text(receipt.get('receipt_sha256', '')[:16])}</code>"
            + (f", bundle <code>{text(receipt['bundle'])}</code>" if receipt.get("bundle") else "")
            + f"</p><button type=\"button\" class=\"verify\" data-run=\"{text(run_id)}\">verify</button>"
            "<pre class=\"verified\" hidden></pre>")


def run_page(doc: dict[str, Any], words: dict[int, str], task_steps: dict[str, str],
             feedback: dict[str, list[dict[str, Any]]], checks: list[dict[str, Any]], tails: dict[str, str],
             timeline_svg: str, receipt: dict[str, Any] | None) -> str:
    r = doc["run"]
    head = (f"<h1>run {text(r['run_id'])} {_outcome(doc['outcome'])}</h1><p class=\"goal\">{text(r['goal'])}</p>"
            f"<p>status {_status(r)}</p>"
            f"<p>target <code>{text(r['target_branch'])}</code>, budget used {_duration(r['used_ms'])}"
            f"{' of ' + format_duration(r['budget_ms']) if r['budget_ms'] else ''}, spend {_spend(r['spend'])}</p>")
    waiting = "".join(f"<p class=\"attention\">{text(a)}</p>" for a in doc.get("attention", []))
    questions = (f"<p class=\"attention\"><a href=\"/inbox\">{len(doc['questions'])} waiting for a person</a></p>"
                 if doc["questions"] else "")
    body = (head + waiting + questions
            + "<h2>timeline</h2>" + f"<div class=\"timeline\">{timeline_svg}</div>"
            + "<h2>tasks</h2>" + _task_rows(doc, feedback, task_steps)
            + "<h2>workers</h2>" + _worker_rows(doc, tails)
            + "<h2>checks</h2>" + _check_rows(checks)
            + "<h2>merge queue</h2>" + _step_rows(doc, words)
            + "<h2>receipt</h2>" + _receipt(r["run_id"], receipt))
    return _main(doc["position"], body)


def inbox_page(position: int, rows: list[dict[str, Any]], who: str,
               changes: Sequence[dict[str, Any]] = ()) -> str:
    """The open questions (answered here) and the candidates that change what their run trusts (approved with
    ``docket approve`` in a terminal: an approval lets an agent's configuration through, so it is not one click)."""
    items = []
    for q in rows:
        if q["kind"] == "propose":
            what = (f"<p class=\"question\">a follow-up task: {text(q['title'])}</p>"
                    f"<pre class=\"prompt\">{block(q['summary'])}</pre>")
            choices = ["accept", "refuse"]
        else:
            what = f"<p class=\"question\">{text(q['question'])}</p>"
            choices = list(q["choices"])
        buttons = "".join(f"<button type=\"submit\" name=\"choice\" value=\"{i}\">{text(c)}</button>"
                          for i, c in enumerate(choices, 1))
        free = ("" if q["kind"] == "propose" or choices else
                "<input name=\"text\" maxlength=\"4000\" required placeholder=\"your answer\">"
                "<button type=\"submit\">answer</button>")
        items.append(f"<li class=\"request\" data-request=\"{text(q['request_key'])}\">"
                     f"<p class=\"meta\">run <a href=\"/runs/{text(q['run_id'])}\">{text(q['run_id'])}</a>, task "
                     f"{text(q['task_id'])}, {text(q['reason'] or 'proposal')}, asked {text(q['asked_at'])}</p>"
                     f"{what}<form class=\"answer\" method=\"post\" action=\"/inbox/{text(q['request_key'])}\">"
                     f"{buttons}{free}</form></li>")
    for c in changes:
        protected = (f"<p>it also changes protected paths: {text(', '.join(c['protected_changes'][:10]))}</p>"
                     if c.get("protected_changes") else "")
        items.append(f"<li class=\"config-change\" data-binding=\"{text(c['binding_id'])}\">"
                     f"<p class=\"meta\">config-change: run <a href=\"/runs/{text(c['run_id'])}\">"
                     f"{text(c['run_id'])}</a>, task {text(c['task_id'])}, candidate {text(c['binding_id'][:12])}</p>"
                     f"<p class=\"question\">passed its checks and changes what the run trusts: "
                     f"{text(', '.join(c['paths']))}</p>{protected}"
                     f"<pre class=\"diff\">{block(_first_lines(c.get('diff') or '(the diff could not be read)'))}</pre>"
                     f"<p>approve: <code>{text(c['approve'])}</code>; refuse: "
                     f"<code>docket run abort {text(c['run_id'])}</code></p></li>")
    body = (f"<h1>inbox</h1><p>answering as <strong>{text(who)}</strong></p>"
            + (f"<ul class=\"inbox\">{''.join(items)}</ul>" if items else "<p class=\"empty\">nothing waits for you</p>"))
    return _main(position, body)


def not_found(position: int, what: str) -> str:
    return _main(position, f"<h1>not found</h1><p>{text(what)}</p>")
