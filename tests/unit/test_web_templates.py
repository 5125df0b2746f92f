"""The web view's pages are Jinja2 templates with autoescape on (issue 36, item 5): every value a page shows is escaped
by the environment, so hostile text in a goal, a title, a name or a tail is shown, never run; the Python in cli/web
hands the templates values, never markup, and no HTML tag can creep back into it; jinja2 is loaded by `docket serve`
alone, not by every command. Pages rendered from documents made here, no server: the e2e tests (test_serve*.py) do
the same through a real `docket serve` and Chromium."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docket.cli.web import pages
from docket.cli.web.timeline import drawing
from docket.domain.reports.timeline import Lane, Span, Timeline

WEB = Path(pages.__file__).resolve().parent
HOSTILE = "<script>alert(1)</script> \"'& <img src=x onerror=alert(2)>\x1b]0;owned\x07"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &#34;&#39;&amp; &lt;img src=x onerror=alert(2)&gt;\\x1b]0;owned\\x07"
NOW = "2024-01-01T01:00:00.000Z"


def _outcome(needs_you: bool = False) -> dict:
    return {"state": "waiting-for-you", "words": f"waiting {HOSTILE}", "detail": HOSTILE, "needs_you": needs_you}


def _runs_doc() -> dict:
    return {"position": 9, "runs": [
        {"run_id": HOSTILE, "outcome": _outcome(True), "status": "active", "waiting_code": "x", "goal": HOSTILE,
         "target_branch": HOSTILE, "used_ms": 61_000, "budget_ms": 3_600_000, "max_tokens": 10,
         "spend": {"reports": 1, "tokens": 5}, "opened_at": "2024-01-01T00:00:00.000Z"}]}


def _run_doc() -> dict:
    return {"position": 9, "outcome": _outcome(),
            "run": {"run_id": HOSTILE, "goal": HOSTILE, "status": "completed", "target_branch": HOSTILE,
                    "used_ms": 1_000, "budget_ms": None, "spend": {}},
            "attention": [HOSTILE], "questions": [{}],
            "tasks": [{"task_id": HOSTILE, "title": HOSTILE, "state": "awaiting-input", "cycles": 1}],
            "workers": [{"worker_id": HOSTILE, "generation": 1, "status": HOSTILE, "elapsed_ms": 2_000,
                         "egress_refused": 1, "egress_hosts": HOSTILE}],
            "integration_steps": [{"step": 1, "task_id": HOSTILE, "status": "verified", "merge_commit": HOSTILE}]}


def _timeline() -> Timeline:
    return Timeline(0, 10_000, (Lane(HOSTILE, (Span("agent", 0, 5_000, HOSTILE, HOSTILE),)),))


def _every_page() -> dict[str, pages.Page]:
    run = pages.run_page(_run_doc(), {1: HOSTILE}, {HOSTILE: HOSTILE},
                         {HOSTILE: [{"generation": 1, "code": HOSTILE, "check": HOSTILE}]},
                         [{"task_id": HOSTILE, "check": HOSTILE, "result": "failed", "tail": f"{HOSTILE}\n{HOSTILE}"}],
                         {HOSTILE: f"one\n{HOSTILE}"}, drawing(_timeline()),
                         {"receipt_sha256": HOSTILE, "bundle": HOSTILE})
    questions = [{"kind": "ask", "request_key": HOSTILE, "run_id": HOSTILE, "task_id": HOSTILE, "reason": HOSTILE,
                  "asked_at": HOSTILE, "question": HOSTILE, "choices": [HOSTILE, "b"]},
                 {"kind": "propose", "request_key": HOSTILE, "run_id": HOSTILE, "task_id": HOSTILE, "reason": None,
                  "asked_at": HOSTILE, "title": HOSTILE, "summary": f"{HOSTILE}\n{HOSTILE}", "choices": []}]
    changes = [{"binding_id": HOSTILE, "run_id": HOSTILE, "task_id": HOSTILE, "paths": [HOSTILE],
                "protected_changes": [HOSTILE], "diff": f"+{HOSTILE}\n-{HOSTILE}", "approve": HOSTILE}]
    return {"runs": pages.runs_page(_runs_doc(), NOW), "run": run,
            "inbox": pages.inbox_page(9, questions, HOSTILE, changes), "not found": pages.not_found(9, HOSTILE)}


@pytest.mark.parametrize("fragment", [False, True], ids=["page", "fragment"])
@pytest.mark.parametrize("name", ["runs", "run", "inbox", "not found"])
def test_hostile_text_is_escaped_on_every_page(name, fragment):
    html = pages.render(_every_page()[name], title=f"{name} {HOSTILE}", csrf='"><script>', fragment=fragment)
    assert ESCAPED in html, html
    assert "<img" not in html and "\x1b" not in html and "\x07" not in html
    assert "alert(1)</script>" not in html and '"><script>' not in html
    # the one script is the layout's own file; a fragment (what app.js swaps in) has none
    assert re.findall(r"<script[^>]*>", html) == ([] if fragment else ['<script src="/static/app.js" defer>'])
    assert html.startswith("<main data-position=\"9\">" if fragment else "<!doctype html>\n<html lang=\"en\">")
    assert not fragment or html.endswith("</main>")


def test_every_text_shown_in_a_page_is_escaped_where_it_is_shown():
    run = pages.render(_every_page()["run"], title="run", csrf="c")
    shown = run.count(ESCAPED)  # goal, target, attention, task (id, title, step), worker (id, status, hosts, tail),
    assert shown >= 15, shown  # check (task, check, tail x2), merge step (task, state), receipt bundle, timeline
    assert f'data-task="{ESCAPED}"' in run and f'data-run="{ESCAPED}"' in run  # in attributes too
    inbox = pages.render(_every_page()["inbox"], title="inbox", csrf="c")
    assert f'action="/inbox/{ESCAPED}"' in inbox and f'<pre class="prompt">{ESCAPED}\n{ESCAPED}</pre>' in inbox
    assert f'<pre class="diff">+{ESCAPED}\n-{ESCAPED}</pre>' in inbox  # a block's line breaks kept, each line escaped
    runs = pages.render(_every_page()["runs"], title="runs", csrf="c")
    assert f'<td class="goal">{ESCAPED}</td>' in runs and f'<a href="/runs/{ESCAPED}">' in runs


def test_a_goal_with_a_line_break_shows_it_as_an_escape_not_a_line():
    doc = _runs_doc()
    doc["runs"][0]["goal"] = "one\ntwo"
    assert '<td class="goal">one\\ntwo</td>' in pages.render(pages.runs_page(doc, NOW), title="runs", csrf="c")


def test_the_timeline_picture_escapes_its_task_names_and_labels():
    svg = pages.render_timeline(drawing(_timeline()))
    assert svg.startswith("<svg xmlns=\"http://www.w3.org/2000/svg\"") and svg.endswith("</svg>")
    assert "<script" not in svg and "<img" not in svg and f"<title>{ESCAPED}</title>" in svg
    assert f"<title>{ESCAPED}: {ESCAPED}, 5s</title>" in svg and '<rect class="span agent" x="170.0"' in svg


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal in a module (docstrings and f-strings' text included), with its line."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9-]*(?=[\s>/])|<!doctype", re.IGNORECASE)


def test_no_html_is_assembled_in_the_python_of_the_web_view():
    """Markup lives in cli/web/templates/ only: a tag in a Python string (`<div`, `<td`, `<a `, `</span>`...) is
    HTML assembled by hand again, which autoescape cannot protect. Neither is hand escaping or Markup needed."""
    sources = sorted(WEB.rglob("*.py"))
    assert {p.name for p in sources} >= {"app.py", "pages.py", "timeline.py", "auth.py"}
    found = [f"{p.relative_to(WEB)}:{line}: {TAG.search(s).group()!r}" for p in sources for line, s in _strings(p)
             if TAG.search(s)]
    assert found == []
    for path in sources:
        source = path.read_text()
        assert not re.search(r"\bimport escape\b|\bhtml\.escape\b|\bMarkup\b|markupsafe", source), path.name


def test_the_tag_check_catches_a_tag():
    assert [TAG.search(s).group() for s in ("<div>", "<td class", "<a href", "</span>", "x <br/>")] == [
        "<div", "<td", "<a", "</span", "<br"]
    assert not any(TAG.search(s) for s in ("a < b", "Iterator[Any]", "1<2", "the main element"))


def test_the_templates_escape_everything_they_print():
    """No template marks data safe: `|safe`, `Markup` and autoescape switched off appear in none of them."""
    templates = sorted(pages.TEMPLATES.iterdir())
    assert {p.name for p in templates} >= {"base.html", "main.html", "runs.html", "run.html", "inbox.html",
                                           "not_found.html", "macros.html", "timeline.svg"}
    for path in templates:
        text = path.read_text()
        assert not re.search(r"\|\s*safe\b|\bMarkup\b|(?i:autoescape\s+false)", text), path.name


def test_jinja2_and_the_web_view_are_loaded_by_docket_serve_alone():
    """Every other command starts without them: the parser of every command built, serve's module imported (the
    web view's own modules are imported once it serves)."""
    code = ("import sys; from docket.cli import app; app.build_parser(); import docket.cli.web.serve; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jinja2', 'markupsafe') "
            "or m.startswith('docket.cli.web.') and m != 'docket.cli.web.serve'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
