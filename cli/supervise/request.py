"""docket request: what an agent without MCP says to docket, run inside its workspace (through its channel).

The agent's channel (``DOCKET_REQUESTS``, set by docket when it launches the agent) binds every request to the
agent's own run, task and generation; nothing here names them. Without --id, a request's id is derived from its
content, so the same question asked twice is one question with one answer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group
from ...domain.kernel.codes import Code

__all__ = ["ask", "register", "send_request"]

POLL_SECONDS = 2.0


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    verbs = group(nouns, "request", "ask docket something from inside an agent's workspace: a question for a person, "
                                    "progress, a follow-up task, done (its channel is $DOCKET_REQUESTS)",
                  "docket request ask 'Which database should the cache use?' --choice sqlite --choice postgres")

    def verb(name: str, handler: Any, help: str, example: str) -> argparse.ArgumentParser:  # noqa: A002
        p = command(verbs, name, handler, common, help, example)
        p.add_argument("--id", dest="request_id", metavar="ID",
                       help="the request's id (default: one derived from its content)")
        p.add_argument("--socket", metavar="PATH", help="the channel (default: $DOCKET_REQUESTS)")
        return p

    p = verb("ask", ask_command, "ask a person and wait for the answer, printed on stdout (exit 0); refused: exit 3",
             "docket request ask 'May I delete the old migrations?' --reason approval")
    p.add_argument("question", metavar="QUESTION", help="the question, as the person will read it")
    p.add_argument("--reason", choices=("blocked", "choice", "approval"), default="blocked",
                   help="why: blocked (cannot go on), choice (pick one of --choice), approval (may it)")
    p.add_argument("--choice", dest="choices", action="append", metavar="TEXT", default=[],
                   help="a choice the person may pick (repeat; up to 20)")
    p.add_argument("--no-wait", action="store_true", help="do not wait: print 'waiting' and exit 0 if unanswered")
    p.add_argument("--timeout", metavar="SECONDS", type=float,
                   help="wait at most this long (then exit 7, the question still open)")
    p = verb("progress", progress_command, "report progress (and, optionally, this generation's usage so far)",
             "docket request progress 'tests pass; writing docs' --cost 0.42")
    p.add_argument("summary", metavar="SUMMARY", help="how far the work got")
    p.add_argument("--input-tokens", type=int, metavar="N", help="input tokens this generation used so far")
    p.add_argument("--output-tokens", type=int, metavar="N", help="output tokens this generation used so far")
    p.add_argument("--cost", metavar="USD", help="the generation's cost so far, in US dollars")
    p = verb("propose", propose_command, "propose a follow-up task (the run's [inbox] proposals decides)",
             "docket request propose 'document the cache' --prompt 'Write docs/cache.md.'")
    p.add_argument("title", metavar="TITLE", help="the follow-up task's title")
    p.add_argument("--prompt", required=True, metavar="TEXT", help="what its agent is to do")
    p.add_argument("--depends-on", dest="depends_on", action="append", metavar="TASK", default=[],
                   help="a task it starts after (repeat)")
    p = verb("finish", finish_command, "say the work is done, with a summary (its checks still judge it)",
             "docket request finish 'cache added, with tests'")
    p.add_argument("summary", metavar="SUMMARY", help="what was done")


def channel_path(given: str | None) -> Path:
    from ...adapters.world.processes.request_channel import CHANNEL_VARIABLE
    from ...domain.kernel.errors import NotFound

    path = given or os.environ.get(CHANNEL_VARIABLE)
    if not path:
        raise NotFound(Code.NO_CHANNEL, f"no request channel: docket sets ${CHANNEL_VARIABLE} for the agents it "
                                     "launches; run this inside an agent's workspace, or pass --socket")
    return Path(path)


def derived_id(kind: str, fields: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps({"kind": kind, **fields}, sort_keys=True).encode()).hexdigest()
    return f"{kind}-{digest[:24]}"


def send_request(path: Path, kind: str, fields: dict[str, Any], request_id: str | None = None) -> dict[str, Any]:
    """Send the request over the channel; its reply. NotFound when no docket serves the channel."""
    from ...adapters.world.processes.request_channel import send
    from ...domain.kernel.errors import NotFound

    document = {"kind": kind, "request_id": request_id or derived_id(kind, fields), **fields}
    try:
        return send(path, document)
    except (OSError, ValueError) as e:
        raise NotFound(Code.NO_CHANNEL, f"no docket serves the request channel {path} ({type(e).__name__}): its "
                                     "generation has ended, or this is not an agent's workspace") from None


def ask(path: Path, question: str, reason: str, choices: list[str], *, request_id: str | None = None,
        wait_seconds: float | None = None) -> dict[str, Any]:
    """Ask, then ask again every POLL_SECONDS until answered (or refused, expired, or wait_seconds passed)."""
    fields: dict[str, Any] = {"question": question, "reason": reason, "choices": choices}
    request_id = request_id or derived_id("ask", fields)
    deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
    while True:
        reply = send_request(path, "ask", fields, request_id)
        if reply.get("status") != "waiting" or (deadline is not None and time.monotonic() >= deadline):
            return reply
        time.sleep(POLL_SECONDS if deadline is None else max(0.0, min(POLL_SECONDS, deadline - time.monotonic())))


def _finish(ctx: Context, reply: dict[str, Any], human: str | None) -> int:
    from ...domain.kernel.errors import Refused, WorkStopped
    from ..console.output import emit

    status = reply.get("status")
    if status == "refused" or status == "error":
        raise Refused(str(reply.get("code") or "refused"), str(reply.get("message") or "refused"))
    if status == "expired":
        raise WorkStopped(Code.QUESTION_EXPIRED, "the question's deadline passed unanswered")
    emit(ctx.json, reply, human if human is not None else str(status))
    return 0


def ask_command(ctx: Context) -> int:
    from ...domain.kernel.errors import WorkStopped

    a = ctx.args
    wait = 0.0 if a.no_wait else a.timeout
    reply = ask(channel_path(a.socket), a.question, a.reason, a.choices, request_id=a.request_id, wait_seconds=wait)
    if reply.get("status") == "waiting" and not a.no_wait:
        raise WorkStopped(Code.STILL_WAITING, f"no answer within {a.timeout:g}s; the question ({reply.get('request')}) "
                                           "stays open: ask again to wait on")
    return _finish(ctx, reply, reply.get("answer") if reply.get("status") == "answered" else "waiting")


def _cost(text: str | None) -> int | None:
    if text is None:
        return None
    from decimal import Decimal, InvalidOperation

    from ...domain.kernel.errors import BadInput

    try:
        amount = Decimal(text)
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount < 0 or amount > 10 ** 9:
        raise BadInput(Code.BAD_COST, f"{text[:40]!r} is not an amount of US dollars (e.g. 0.42)")
    return int((amount * 1_000_000).to_integral_value())


def progress_command(ctx: Context) -> int:
    a = ctx.args
    fields = {"summary": a.summary, "input_tokens": a.input_tokens, "output_tokens": a.output_tokens,
              "cost_micro_usd": _cost(a.cost)}
    fields = {k: v for k, v in fields.items() if v is not None}
    return _finish(ctx, send_request(channel_path(a.socket), "progress", fields, a.request_id), None)


def propose_command(ctx: Context) -> int:
    a = ctx.args
    fields = {"title": a.title, "prompt": a.prompt, "depends_on": a.depends_on}
    reply = send_request(channel_path(a.socket), "propose", fields, a.request_id)
    return _finish(ctx, reply, reply.get("decision"))


def finish_command(ctx: Context) -> int:
    a = ctx.args
    return _finish(ctx, send_request(channel_path(a.socket), "finish", {"summary": a.summary}, a.request_id), None)
