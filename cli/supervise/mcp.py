"""docket mcp: docket as an MCP server (stdio) for the agent it launched, on that agent's request channel.

An agent that loads MCP servers (Claude Code with ``--mcp-config {mcp_config}``, Codex CLI with its
``mcp_servers``) starts this inside its own sandbox. It opens nothing of docket's: every tool call is one request
over the generation's channel (``--socket``, default ``$DOCKET_REQUESTS``), which binds it to that agent's run,
task and generation. Built on the official MCP SDK (``mcp``): its ``MCPServer`` turns each typed function below
into a tool with a JSON schema, and speaks the protocol's stdio transport.

Tools (prompts may name them; Claude Code calls them ``mcp__docket__<tool>``, Codex CLI offers them in the
namespace ``mcp__docket``):

- ``ask_human(question, reason, choices)``: a person's answer, once one is recorded; until then, after waiting up
  to ``--wait`` seconds, a "still waiting" result: call it again with the same question to wait on.
- ``report_progress(summary)``, ``propose_task(title, prompt, depends_on)``, ``finish(summary)``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

from ..console.context import Context
from ..console.parsing import command
from ...domain.kernel.codes import Code

__all__ = ["register"]

DEFAULT_WAIT_SECONDS = 50.0  # under the time an MCP client allows a tool call


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "mcp", serve_mcp, common,
                "serve docket's tools to the agent docket launched (MCP over stdio): ask_human, report_progress, "
                "propose_task, finish; started by the agent, inside its sandbox",
                "docket mcp --socket \"$DOCKET_REQUESTS\"")
    p.add_argument("--socket", metavar="PATH", help="the agent's request channel (default: $DOCKET_REQUESTS)")
    p.add_argument("--wait", metavar="SECONDS", type=float, default=DEFAULT_WAIT_SECONDS,
                   help=f"how long ask_human waits for an answer before it says 'still waiting' "
                        f"(default {DEFAULT_WAIT_SECONDS:g})")


def _said(reply: dict[str, Any]) -> str:
    status = reply.get("status")
    if status in ("refused", "error"):
        return f"refused ({reply.get('code')}): {reply.get('message')}"
    if status == "answered":
        return f"Answer from {reply.get('answered_by')}: {reply.get('answer')}"
    if status == "waiting":
        return ("Still waiting for a person's answer (question " + str(reply.get("request")) + "). Call ask_human "
                "again with the same question to wait on; do not guess the answer.")
    if status == "expired":
        return "No one answered before the question's deadline."
    decision = reply.get("decision")
    if decision == "refused" and reply.get("message"):
        return f"recorded (refused): {reply.get('message')}"
    return f"recorded ({decision})" if decision else "recorded"


def _told(call: Any) -> str:
    """What a tool says: the channel's reply in words, or why docket could not be reached."""
    from ...domain.kernel.errors import DocketError

    try:
        return _said(call())
    except DocketError as e:
        return f"docket could not take it ({e.code}): {e.message}"


def build_server(channel: Path, wait_seconds: float) -> Any:
    from mcp.server.mcpserver import MCPServer

    from .request import ask, send_request

    server = MCPServer("docket", instructions=(
        "docket supervises this task. Ask a person with ask_human when you are blocked, must choose, or need "
        "approval; report_progress as you go; propose_task for follow-up work; finish when the task is done."))

    @server.tool(structured_output=False)
    def ask_human(question: str, reason: Literal["blocked", "choice", "approval"] = "blocked",
                  choices: list[str] | None = None) -> str:
        """Ask the person supervising this run a question and get their answer. reason: blocked (you cannot go
        on without it), choice (pick one of choices), approval (may you do something). Returns the answer, or
        that it is still waiting: then call ask_human again with the same arguments."""
        return _told(lambda: ask(channel, question, reason, list(choices or []), wait_seconds=wait_seconds))

    @server.tool(structured_output=False)
    def report_progress(summary: str) -> str:
        """Tell the person supervising this run how far you got."""
        return _told(lambda: send_request(channel, "progress", {"summary": summary}))

    @server.tool(structured_output=False)
    def propose_task(title: str, prompt: str, depends_on: list[str] | None = None) -> str:
        """Propose a follow-up task for after this one: its title, its prompt (complete: another agent does it,
        starting from this task's delivered work), the run's tasks it also depends on. The run's policy accepts
        it (it becomes a task of this run), queues it for a person to accept or refuse, or refuses it."""
        return _told(lambda: send_request(channel, "propose", {"title": title, "prompt": prompt,
                                                               "depends_on": list(depends_on or [])}))

    @server.tool(structured_output=False)
    def finish(summary: str) -> str:
        """Say your work on this task is done, with a summary of what you did. Checks still judge the work."""
        return _told(lambda: send_request(channel, "finish", {"summary": summary}))

    return server


def serve_mcp(ctx: Context) -> int:
    from .request import channel_path

    channel = channel_path(ctx.args.socket)
    if not channel.is_socket():
        from ...domain.kernel.errors import NotFound

        raise NotFound(Code.NO_CHANNEL, f"{channel} is not a request channel: docket serves one for each agent it "
                                     "launches, for as long as that agent runs")
    build_server(channel, max(0.0, ctx.args.wait)).run("stdio")
    return 0
