"""The pages of `docket serve`, rendered server-side from what `docket status` and `docket inbox` read.

Python here reads the documents and hands plain values (strings, numbers, lists, dicts) to the templates in
templates/; the templates hold every tag. The environment escapes every value a template prints (autoescape), after
making it visible as the terminal would show it (controls and invisible characters as escapes: `finalize`), so no
value can be printed raw by forgetting to escape it. No page holds a script of its own (the one script is a file,
app.js, and the Content-Security-Policy forbids any other). Each page is a main element inside one layout; app.js
swaps it for a fresh one (?fragment=main) when the ledger moves.

jinja2 is imported here, and this module only by the web application (cli/web/app.py, which only `docket serve`
imports): no other command pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from ...domain.kernel.values import format_cost, format_duration, to_ms
from ..console.output import shown

__all__ = ["TEMPLATES", "inbox_page", "not_found", "render", "render_timeline", "run_page", "runs_page"]

TEMPLATES = Path(__file__).resolve().parent / "templates"

Page = tuple[str, dict[str, Any]]  # a template's name and the values it shows


def _visible(value: object) -> object:
    """What the environment does to every value a template prints, before escaping it: None shows as nothing, text
    as the terminal would show it. What a template itself made (a macro's output, an included template) is left as
    it is: it is already escaped, and its line breaks are meant."""
    if hasattr(value, "__html__"):
        return value
    return "" if value is None else shown(value)


def _lines(value: object) -> list[str]:
    """Text of several lines as its lines (the macro `block` prints each, the breaks kept: a tail, a diff)."""
    return str("" if value is None else value).split("\n")


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=_visible,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             auto_reload=False)
    env.filters["lines"] = _lines
    return env


def render(page: Page, *, title: str, csrf: str, fragment: bool = False) -> str:
    """The page in the whole document, or (fragment) its main element alone, as app.js fetches it."""
    name, values = page
    return _environment().get_template(name).render(values, layout="main.html" if fragment else "base.html",
                                                    title=title, csrf=csrf)


def render_timeline(drawing: dict[str, Any]) -> str:
    """A run's timeline as an SVG document of its own (timeline.py's drawing)."""
    return _environment().get_template("timeline.svg").render(timeline=drawing)


def _first_lines(value: str, count: int = 200) -> str:
    lines = value.split("\n")
    return "\n".join(lines[:count] + ([f"... {len(lines) - count} more line(s): docket inbox --json"]
                                       if len(lines) > count else []))


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


def _budget(r: dict[str, Any]) -> str:
    return _duration(r["used_ms"]) + (f" of {format_duration(r['budget_ms'])}" if r["budget_ms"] else "")


def _outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    """What the run came to (domain/outcome.py), for the macro `outcome`."""
    return {"state": str(outcome["state"]),
            "words": outcome["words"] + (f" ({outcome['detail']})" if outcome.get("detail") else ""),
            "needs_you": bool(outcome["needs_you"])}


def _status(r: dict[str, Any]) -> str:
    """The run's status as the ledger says it, beside its outcome."""
    return "waiting" if r["status"] == "active" and r.get("waiting_code") else str(r["status"])


def runs_page(doc: dict[str, Any], now: str) -> Page:
    rows = []
    for r in reversed(doc["runs"]):
        limits = ", ".join(x for x in (f"max {format_cost(r['max_cost_micro_usd'])}" if r.get("max_cost_micro_usd")
                                       else "", f"max {r['max_tokens']} tokens" if r.get("max_tokens") else "") if x)
        ended = r.get("closed_at") or now
        duration = max(0, to_ms(ended) - to_ms(r["opened_at"])) if r.get("opened_at") else None
        rows.append({"run_id": r["run_id"], "needs_you": bool(r["outcome"]["needs_you"]),
                     "outcome": _outcome(r["outcome"]), "status": _status(r), "goal": r["goal"],
                     "target_branch": r["target_branch"], "budget": _budget(r),
                     "spend": _spend(r["spend"]) + (f" ({limits})" if limits else ""),
                     "opened_at": r.get("opened_at"), "duration": _duration(duration)})
    return "runs.html", {"position": doc["position"], "runs": rows}


def _tasks(doc: dict[str, Any], feedback: dict[str, list[dict[str, Any]]],
           task_steps: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for t in doc["tasks"]:
        state = str(t.get("state") or t.get("result") or "planned")
        said = task_steps.get(t["task_id"])
        rows.append({"task_id": t["task_id"], "title": t["title"], "state": state,
                     "step": said if said and said != state else None, "cycles": t.get("cycles") or 0,
                     "reasons": [{"generation": f.get("generation"), "code": f.get("code"), "check": f.get("check")}
                                 for f in feedback.get(t["task_id"], [])]})
    return rows


def _workers(doc: dict[str, Any], tails: dict[str, str]) -> list[dict[str, Any]]:
    """Each worker but the supervisor, with its last output, and what its egress proxy refused (EgressRefused)."""
    return [{"worker_id": w["worker_id"], "generation": w["generation"], "status": w.get("status") or "registered",
             "egress_refused": int(w["egress_refused"]) if w.get("egress_refused") else 0,
             "egress_hosts": w.get("egress_hosts") or "?", "time": _duration(w.get("elapsed_ms")),
             "tail": tails.get(w["worker_id"]) or w.get("last_line") or ""}
            for w in doc["workers"] if w.get("role") != "supervisor"]


def _checks(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"task_id": c.get("task_id"), "check": c.get("check"),
             "result": str(c.get("result") or c.get("status") or "running"), "tail": c.get("tail") or ""}
            for c in checks]


def _steps(doc: dict[str, Any], words: dict[int, str]) -> list[dict[str, Any]]:
    return [{"step": s["step"], "task_id": s["task_id"], "state": words.get(s["step"], s["status"]),
             "merge": (s.get("merge_commit") or "")[:12]} for s in doc["integration_steps"]]


def run_page(doc: dict[str, Any], words: dict[int, str], task_steps: dict[str, str],
             feedback: dict[str, list[dict[str, Any]]], checks: list[dict[str, Any]], tails: dict[str, str],
             timeline: dict[str, Any], receipt: dict[str, Any] | None) -> Page:
    """One run; timeline: timeline.py's drawing of it, which the page includes as its picture."""
    r = doc["run"]
    run = {"run_id": r["run_id"], "outcome": _outcome(doc["outcome"]), "goal": r["goal"], "status": _status(r),
           "target_branch": r["target_branch"], "budget": _budget(r), "spend": _spend(r["spend"])}
    sealed = None if receipt is None else {"sha256": (receipt.get("receipt_sha256") or "")[:16],
                                           "bundle": receipt.get("bundle")}
    return "run.html", {"position": doc["position"], "run": run, "attention": list(doc.get("attention", [])),
                        "questions": len(doc["questions"]), "timeline": timeline,
                        "tasks": _tasks(doc, feedback, task_steps), "workers": _workers(doc, tails),
                        "checks": _checks(checks), "steps": _steps(doc, words), "receipt": sealed}


def inbox_page(position: int, rows: list[dict[str, Any]], who: str, changes: Sequence[dict[str, Any]] = ()) -> Page:
    """The open questions (answered here) and the candidates that change what their run trusts (approved with
    ``docket approve`` in a terminal: an approval lets an agent's configuration through, so it is not one click)."""
    questions = []
    for q in rows:
        proposal = q["kind"] == "propose"
        choices = ["accept", "refuse"] if proposal else list(q["choices"])
        questions.append({"request_key": q["request_key"], "run_id": q["run_id"], "task_id": q["task_id"],
                          "reason": q["reason"] or "proposal", "asked_at": q["asked_at"], "proposal": proposal,
                          "title": q.get("title") if proposal else None,
                          "summary": q.get("summary") if proposal else None,
                          "question": None if proposal else q["question"], "choices": choices,
                          "free": not proposal and not choices})
    listed = [{"binding_id": c["binding_id"], "candidate": c["binding_id"][:12], "run_id": c["run_id"],
               "task_id": c["task_id"], "paths": ", ".join(c["paths"]),
               "protected": ", ".join(c["protected_changes"][:10]) if c.get("protected_changes") else None,
               "diff": _first_lines(c.get("diff") or "(the diff could not be read)"), "approve": c["approve"]}
              for c in changes]
    return "inbox.html", {"position": position, "who": who, "questions": questions, "changes": listed}


def not_found(position: int, what: str) -> Page:
    return "not_found.html", {"position": position, "what": what}
