"""`docket serve`'s web application (Starlette): the runs, one run, the inbox, read from the views and the ledger.

Each request reads through a command context of its own (cli/console/context.py), as `docket status` does, in Starlette's
thread pool; nothing is cached between requests but the token. The one write is an answer from the inbox, made as
`docket answer` makes it (adapters/service_layer/use_cases/requests.py), via "web". `/events` streams the ledger's head
position as server-sent events; the page's script fetches a fresh main element when it moves.

The pages are Jinja2 templates (templates/, rendered by pages.py with autoescape on): this module hands them values,
never markup.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import pages
from .auth import COOKIE, CSRF_HEADER, csrf_value, token_matches

__all__ = ["build_app"]

STATIC = Path(__file__).resolve().parent / "static"
STATIC_TYPES = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8",
                "icon.svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
           "cache-control": "no-store", "x-frame-options": "DENY"}
EVENT_POLL_SECONDS = 0.5


class TokenRequired:
    """Every route needs the token: as the cookie, a bearer header, or (a GET, once) ?token= in the URL, which sets
    the cookie and sends the browser on without it. Anything else is 401, the word only. Every response carries the
    security headers."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in HEADERS]
                message = {**message, "headers": headers + [(k.encode(), v.encode()) for k, v in HEADERS.items()]}
            await send(message)

        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and request.method == "GET" and token_matches(given, self.token):
            response: Response = RedirectResponse(request.url.remove_query_params("token").path or "/", 303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            await response(scope, receive, secured)
            return
        bearer = request.headers.get("authorization", "")
        if token_matches(request.cookies.get(COOKIE), self.token) or (
                bearer.startswith("Bearer ") and token_matches(bearer[7:], self.token)):
            await self.app(scope, receive, secured)
            return
        await PlainTextResponse("unauthorized", 401, headers={"www-authenticate": "Bearer"})(scope, receive, secured)


def build_app(ledger: str | None, token: str, *, public_key: Path | None = None) -> Starlette:
    """The application over the ledger at ledger (None: the one around the working directory, as every command
    finds it); public_key: what a receipt's "verify" checks it with (default: the .pub beside the run's key)."""
    csrf = csrf_value(token)

    @contextmanager
    def context() -> Iterator[Any]:
        from ..console.context import Context

        ctx = Context(argparse.Namespace(ledger=ledger, json=True))
        try:
            yield ctx
        finally:
            ctx.close()

    def page(request: Request, title: str, shown: pages.Page, status: int = 200) -> Response:
        fragment = request.query_params.get("fragment") == "main"
        return HTMLResponse(pages.render(shown, title=title, csrf=csrf, fragment=fragment), status)

    def runs_view(request: Request) -> Response:
        from ..supervise.status import runs_document

        with context() as ctx:
            views, now = ctx.views(), ctx.clock.now()
            doc = runs_document(views.conn, now, views.position(), lambda: ctx.approval_required)
        if request.query_params.get("format") == "json":
            return JSONResponse(doc)
        return page(request, "runs", pages.runs_page(doc, now))

    def run_view(request: Request) -> Response:
        from ..supervise.status import run_document, with_config_changes

        run_id = request.path_params["run_id"]
        with context() as ctx:
            views, now = ctx.views(), ctx.clock.now()
            doc, words, current = run_document(views.conn, run_id, now, views.position(),
                                               lambda: ctx.approval_required)
            if doc is None:
                return page(request, "not found", pages.not_found(views.position(), f"no run {run_id}"), 404)
            with_config_changes(ctx, doc)  # a held change to what the run trusts: waiting for you, as in status
            events = _run_events(ctx, run_id)
            receipt = _receipt(ctx, run_id, events)
        if request.query_params.get("format") == "json":
            return JSONResponse(doc)
        checks, tails, feedback = _details(doc, events)
        drawn = _timeline(doc, events, now)
        return page(request, f"run {run_id}", pages.run_page(doc, words, current, feedback, checks, tails, drawn,
                                                            receipt))

    def timeline_view(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        from ..supervise.status import run_document

        with context() as ctx:
            views, now = ctx.views(), ctx.clock.now()
            doc, _, _ = run_document(views.conn, run_id, now, views.position(), lambda: ctx.approval_required)
            if doc is None:
                return PlainTextResponse("not found", 404)
            events = _run_events(ctx, run_id)
        return Response(pages.render_timeline(_timeline(doc, events, now)), media_type="image/svg+xml")

    def verify_view(request: Request) -> Response:
        if not _same_origin(request) or not token_matches(request.headers.get(CSRF_HEADER), csrf):
            return JSONResponse({"ok": False, "error": "forbidden"}, 403)
        with context() as ctx:
            result = _verify(ctx, request.path_params["run_id"], public_key)
        return JSONResponse(result)

    def inbox_view(request: Request) -> Response:
        from ...adapters.service_layer.use_cases.requests import local_user
        from ...projections.inbox import open_questions

        from ...adapters.service_layer.merge_queue.approval import waiting_for_a_person

        with context() as ctx:
            views = ctx.views()
            rows = open_questions(views.conn)
            changes = waiting_for_a_person(ctx.ledger, views, with_diff=True)
            position = views.position()
        if request.query_params.get("format") == "json":
            return JSONResponse({"questions": rows, "config_changes": changes})
        return page(request, "inbox", pages.inbox_page(position, rows, local_user(), changes))

    async def answer_view(request: Request) -> Response:
        if not _same_origin(request) or not token_matches(request.headers.get(CSRF_HEADER), csrf):
            return JSONResponse({"ok": False, "error": "forbidden"}, 403)
        form = await request.form()
        key = request.path_params["key"]
        choice, text = form.get("choice"), form.get("text")
        return await asyncio.to_thread(_answer, context, key, str(choice) if choice else None,
                                       str(text) if text else None)

    async def events_view(request: Request) -> Response:
        async def positions() -> Any:
            last = -1
            while not await request.is_disconnected():
                position = await asyncio.to_thread(_head, context)
                if position != last:
                    last = position
                    yield f"event: position\ndata: {position}\n\n"
                await asyncio.sleep(EVENT_POLL_SECONDS)

        return StreamingResponse(positions(), media_type="text/event-stream")

    def static_view(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_TYPES:
            return PlainTextResponse("not found", 404)
        return Response((STATIC / name).read_bytes(), media_type=STATIC_TYPES[name])

    routes = [Route("/", runs_view), Route("/runs/{run_id}", run_view),
              Route("/runs/{run_id}/timeline.svg", timeline_view),
              Route("/runs/{run_id}/verify", verify_view, methods=["POST"]), Route("/inbox", inbox_view),
              Route("/inbox/{key}", answer_view, methods=["POST"]), Route("/events", events_view),
              Route("/static/{name}", static_view),
              Route("/favicon.ico", lambda request: RedirectResponse("/static/icon.svg", 301))]
    app = Starlette(routes=routes)
    app.add_middleware(TokenRequired, token=token)
    return app


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


def _head(context: Callable[[], Any]) -> int:
    with context() as ctx:
        return ctx.ledger_reader.head_position()


def _run_events(ctx: Any, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The run's events (type without version, recorded_at, payload), in ledger order."""
    from ...adapters.service_layer.kernel.event_log import listed_events

    reader = ctx.ledger_reader
    return [(row[3].split(".v")[0], body["recorded_at"], body["payload"])
            for row, body in listed_events(reader, ctx.paths.views, run_id=run_id, topics=(), after=0,
                                           until=reader.head_position(), lock_timeout=lambda: ctx.lock_timeout)]


def _details(doc: dict[str, Any], events: list[tuple[str, str, dict[str, Any]]]) -> tuple[
        list[dict[str, Any]], dict[str, str], dict[str, list[dict[str, Any]]]]:
    """Each check run with its tail, each worker's last output, each task's failed generations and why."""
    checks: dict[str, dict[str, Any]] = {}
    tails: dict[str, str] = {}
    feedback: dict[str, list[dict[str, Any]]] = {}
    for name, _, p in events:
        if name == "CheckRequested":
            checks[p["check_id"]] = {"task_id": p.get("task_id"), "check": p.get("check"), "result": None,
                                     "tail": ""}
        elif name in ("CheckPassed", "CheckFailed", "CheckTimedOut") and p.get("check_id") in checks:
            checks[p["check_id"]].update(result={"CheckPassed": "passed", "CheckFailed": "failed",
                                                 "CheckTimedOut": "timed-out"}[name], tail=p.get("tail") or "")
        elif name == "WorkerExited":
            tails[p["worker_id"]] = p.get("tail") or ""
        elif name == "TaskFeedbackRecorded":
            feedback.setdefault(p["task_id"], []).append({"generation": p.get("generation"), "code": p.get("code"),
                                                          "check": p.get("check")})
    return list(checks.values()), tails, feedback


def _timeline(doc: dict[str, Any], events: list[tuple[str, str, dict[str, Any]]], now: str) -> dict[str, Any]:
    """The run's timeline as timeline.py lays it out, for templates/timeline.svg to draw."""
    from ...domain.reports.timeline import timeline
    from .timeline import drawing

    run = doc["run"]
    # the axis ends at the run's close: what gc or anything else records in its streams later is not the run's time
    return drawing(timeline(events, [t["task_id"] for t in doc["tasks"]], run["opened_at"], now,
                            run.get("closed_at")))


def _receipt(ctx: Any, run_id: str, events: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The run's sealed receipt (from its events, already read), and its exported bundle if there is one."""
    for name, _, p in reversed(events):
        if name == "ReceiptSealed":
            bundle = ctx.paths.ledger.parent / "receipts" / f"{run_id}.intoto.jsonl"
            return {"receipt_sha256": p.get("receipt_sha256", ""), "bundle": str(bundle) if bundle.is_file() else None}
    return None


def _verify(ctx: Any, run_id: str, public_key: Path | None) -> dict[str, Any]:
    """verify-receipt on the run's exported bundle, as the command runs it, with the public key beside the run's
    export key (or the one `docket serve --key` named)."""
    from ...adapters.service_layer.use_cases.export import verify_bundle
    from ...adapters.world.ledger.signing import load_verifier, read_bundle
    from ...domain.kernel.errors import DocketError
    from ...projections import runs

    bundle = ctx.paths.ledger.parent / "receipts" / f"{run_id}.intoto.jsonl"
    if not bundle.is_file():
        return {"ok": False, "error": "no-bundle", "message": f"run {run_id} has no exported bundle"}
    key = public_key
    if key is None:
        plan = json.loads((runs.get_run(ctx.views().conn, run_id) or {}).get("plan") or "{}")
        private = (plan.get("export_key") or {}).get("path")
        key = Path(private).with_suffix(".pub") if private else None
    if key is None or not key.is_file():
        return {"ok": False, "error": "no-key", "message": "no public key to verify with: start docket serve "
                                                           "with --key PUB"}
    try:
        summary = verify_bundle(read_bundle(str(bundle)), load_verifier(str(key)))
    except DocketError as e:
        return {"ok": False, "error": str(e.code), "message": e.message}
    verified = summary.receipt
    return {"ok": True, "run_id": verified.run_id, "final_commit": verified.final_commit,
            "events_checked": verified.events_checked, "tree_size": verified.tree_size, "key": str(key),
            "outcome": verified.outcome}


def _answer(context: Callable[[], Any], key: str, choice: str | None, text: str | None) -> Response:
    """Record the answer (or a follow-up's decision) as `docket answer` does, by the local user, via the web."""
    from ...adapters.service_layer.use_cases.requests import answer_question, local_user
    from ...adapters.world.files.config_file import find_config, load_config
    from ...domain.kernel.errors import DocketError

    try:
        number = int(choice) if choice is not None else None
    except ValueError:
        return JSONResponse({"ok": False, "error": "no-such-choice", "message": "a choice is a number"}, 400)
    with context() as ctx:
        try:
            trusted = load_config(find_config(Path.cwd())).inbox.trusted
            request = answer_question(ctx.ledger, ctx.clock, key, text=text, choice=number, by=local_user(),
                                      trusted=trusted, via="web", docket_dir=ctx.paths.ledger.parent)
        except DocketError as e:
            status = {5: 404, 3: 409}.get(e.exit_code, 400)  # not found; refused by an invariant; bad input
            return JSONResponse({"ok": False, "error": str(e.code), "message": e.message}, status)
        ctx.update_views()
    return JSONResponse({"ok": True, "request": request.key, "status": request.status,
                         "decision": request.decision, "answer": request.answer})
