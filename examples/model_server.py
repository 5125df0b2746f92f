"""A scripted model server: real agent CLIs do a scripted edit against it, with no network and no API key.

It speaks enough of three APIs for aider, Codex CLI and Claude Code, and replies from a script instead of a
model. Standard library only:

    python3 examples/model_server.py --script SCRIPT.json [--port 0] [--log LOG.jsonl]

It binds 127.0.0.1 (port 0: a free one), prints the port on its first line of output and serves until
SIGTERM or Ctrl-C. Tests use it as a context manager: `with ModelServer(script) as server:` gives
`server.url` (http://127.0.0.1:PORT) and `server.requests`, and stops it on exit, even while a request hangs.

    POST /v1/chat/completions     OpenAI Chat Completions, streamed (SSE) or not: aider, base URL URL/v1
    POST /v1/responses            OpenAI Responses API, streamed or not: Codex CLI, base URL URL/v1
    POST /v1/messages             Anthropic Messages API, streamed or not: Claude Code, base URL URL
    POST /v1/messages/count_tokens, GET /v1/models: answered harmlessly; any other path: 404 with a JSON error

The `/v1` prefix is optional and a query string (`?beta=true`) is ignored.

The script is JSON: rules tried in order, then a default.

    {"rules": [{"match": "greet.py", "files": {"greet.py": "def greet(name): ...\\n"}, "text": "Done."},
               {"match": ["farewell", "Your previous attempt"], "command": "printf 'bye\\n' > bye.txt"},
               {"match": "stall", "hang": true},
               {"match": "break", "status": 500}],
     "default": {"text": "Nothing to do."}}

A rule applies when its `match` (a string, or a list of strings that must all occur) occurs in the prompt:
the text of the request's last user message, or failing that anywhere in the request's messages. What it does:

    files     {"PATH": "CONTENT"}: for aider, the reply holds each file whole in aider's "whole" edit format
              (the path on its own line, then the content in a ``` fence; CONTENT should end with a newline and
              hold no ```); for a CLI that calls tools, the shell command that writes them
    command   the shell command a tool-calling CLI runs: Claude Code's `Bash` tool, Codex's shell tool
              (`shell_command`, `exec_command`, `shell` or `local_shell`, whichever the request offers)
    text      the assistant's words: before aider's files, or the final message after the tool ran ("Done.")
    tool      {"name": NAME, "input": {...}}: first call the tool NAME the request offers (an MCP server's, say
              mcp__docket__ask_human) with `input`: Claude Code's tool of that name, or Codex's function tool of
              that name or, NAME being NAMESPACE__FUNCTION, the function of a namespace tool (Codex offers an
              MCP server's tools in the namespace mcp__SERVER); `command` comes after its result, with {result}
              in the command replaced by that result's text as the CLI sent it, quoted for the shell
    hang      true: accept the request and never answer (until the server stops): for idle-timeout tests
    status    an HTTP error status (e.g. 500) with the API's JSON error body instead of an answer

A tool call is made only when the request offers the tool; the tool results the request carries say which
turn it is (the tool's call, then the command's, then `text`), and a request without the tool gets `text` (a
title or summary request). aider's request for a commit message gets COMMIT_MESSAGE.

Every request is logged, before it is answered: method, path, headers (lower-case names), `api_key` (the
bearer token or x-api-key sent), the JSON body, the API, the rule that matched (its index, or "default") and
the kind of reply. `server.requests` holds them; `--log` appends each as a JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import signal
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

COMMIT_MESSAGE = "Apply the scripted edit"
DEFAULT_TEXT = "Done."
NEWLINE = "\n"
RULE_KEYS = {"match", "files", "command", "text", "hang", "status", "tool"}
CODEX_SHELL_TOOLS = ("shell_command", "exec_command", "shell")  # function tools, in the order they are preferred
TOOL_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


class ScriptError(ValueError):
    """The script is not what this server understands."""


@dataclass(frozen=True)
class Rule:
    name: str  # its index in the script's rules, or "default"
    match: tuple[str, ...]
    files: dict[str, str]
    command: str | None
    text: str
    hang: bool
    status: int | None
    tool: dict[str, Any] | None = None  # a tool call made first: {"name": ..., "input": {...}}

    def applies_to(self, prompt: str) -> bool:
        return all(part in prompt for part in self.match)

    def shell_command(self) -> str | None:
        """The command to run: the script's own, or one that writes the files."""
        if self.command is not None:
            return self.command
        if not self.files:
            return None
        steps = []
        for path, content in self.files.items():
            folder = str(Path(path).parent)
            if folder != ".":
                steps.append(f"mkdir -p {shlex.quote(folder)}")
            steps.append(f"printf '%s' {shlex.quote(content)} > {shlex.quote(path)}")
        return " && ".join(steps)

    def whole_files(self) -> str:
        """The reply aider applies: the text, then each file in aider's "whole" edit format."""
        listings = [f"{path}\n```\n{content if content.endswith(NEWLINE) else content + NEWLINE}```\n"
                    for path, content in self.files.items()]
        return "\n".join([self.text, *listings]) if listings else self.text


def parse_rule(name: str, raw: Any, *, default: bool = False) -> Rule:
    if not isinstance(raw, dict) or set(raw) - RULE_KEYS:
        raise ScriptError(f"rule {name}: an object with keys among {sorted(RULE_KEYS)}")
    match = raw.get("match", [])
    match = (match,) if isinstance(match, str) else tuple(match) if isinstance(match, list) else (None,)
    if (not default and not match) or not all(isinstance(part, str) and part for part in match):
        raise ScriptError(f"rule {name}: match must be a non-empty string or list of them")
    files = raw.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ScriptError(f"rule {name}: files must map paths to contents")
    if not isinstance(raw.get("command", ""), str) or not isinstance(raw.get("text", ""), str):
        raise ScriptError(f"rule {name}: command and text must be strings")
    status = raw.get("status")
    if status is not None and not (isinstance(status, int) and 400 <= status <= 599):
        raise ScriptError(f"rule {name}: status must be an HTTP error status (400-599)")
    tool = raw.get("tool")
    if tool is not None and not (isinstance(tool, dict) and isinstance(tool.get("name"), str)
                                 and isinstance(tool.get("input", {}), dict) and set(tool) <= {"name", "input"}):
        raise ScriptError(f"rule {name}: tool must be an object with a name and an input object")
    return Rule(name=name, match=match, files=files, command=raw.get("command"), text=raw.get("text", DEFAULT_TEXT),
                hang=bool(raw.get("hang", False)), status=status, tool=tool)


@dataclass(frozen=True)
class Script:
    rules: tuple[Rule, ...]
    default: Rule

    @classmethod
    def parse(cls, raw: Any) -> Script:
        if not isinstance(raw, dict) or set(raw) - {"rules", "default"}:
            raise ScriptError('a script is an object with "rules" and "default"')
        rules = tuple(parse_rule(str(i), rule) for i, rule in enumerate(raw.get("rules", [])))
        return cls(rules, parse_rule("default", raw.get("default", {"text": "Nothing to do."}), default=True))

    def rule_for(self, prompt: str, everything: str) -> Rule:
        for text in (prompt, everything):
            for rule in self.rules:
                if rule.applies_to(text):
                    return rule
        return self.default


# Reading requests -------------------------------------------------------------------------------------------

def text_of(content: Any) -> str:
    """The text in a message's content: a string, or a list of blocks (text, input_text, tool results...)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(block) for block in content)
    if isinstance(content, dict):
        return "\n".join(text_of(content[key]) for key in ("text", "content", "output") if key in content)
    return ""


def messages_of(body: dict) -> list[dict]:
    """The conversation: chat and Anthropic `messages`, or the Responses API's `input` items."""
    items = body.get("messages", body.get("input", []))
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def is_tool_result(item: dict) -> bool:
    if item.get("type") in TOOL_OUTPUTS or item.get("role") == "tool":
        return True
    content = item.get("content")
    return item.get("role") == "user" and isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def prompt_of(body: dict) -> tuple[str, str]:
    """(the last user message's text, all the request's text), tool results left out."""
    messages = [m for m in messages_of(body) if not is_tool_result(m)]
    users = [m for m in messages if m.get("role") == "user"]
    system = text_of(body.get("system", "")) + "\n" + text_of(body.get("instructions", ""))
    everything = "\n".join([system, *(text_of(m.get("content", "")) for m in messages)])
    return (text_of(users[-1].get("content", "")) if users else ""), everything


def tool_results(body: dict) -> list[str]:
    """The text of each tool result in the conversation, in order: Anthropic tool_result blocks, the Responses
    API's call outputs."""
    found = []
    for message in messages_of(body):
        content = message.get("content")
        if message.get("type") in TOOL_OUTPUTS:
            found.append(text_of(message.get("output", "")))
        elif message.get("role") == "user" and isinstance(content, list):
            found += [text_of(block.get("content", "")) for block in content
                      if isinstance(block, dict) and block.get("type") == "tool_result"]
    return found


def asks_commit_message(body: dict) -> bool:
    """Whether this is aider's request for a commit message: its system prompt asks for one."""
    messages = messages_of(body)
    return bool(messages) and messages[0].get("role") == "system" and (
        "commit message" in text_of(messages[0].get("content", "")).lower())


def offered_tools(body: dict) -> list[dict]:
    return [tool for tool in body.get("tools") or [] if isinstance(tool, dict)]


def offered_functions(body: dict) -> dict[str, tuple[str | None, str]]:
    """The Responses API function tools offered, by full name: (namespace, name). A namespace's function's full
    name is NAMESPACE__NAME (Codex offers an MCP server's tools in the namespace mcp__SERVER)."""
    functions = {}
    for tool in offered_tools(body):
        if tool.get("type") == "function":
            functions[tool.get("name")] = (None, tool.get("name"))
        elif tool.get("type") == "namespace":
            functions.update({f"{tool.get('name')}__{inner.get('name')}": (tool.get("name"), inner.get("name"))
                              for inner in tool.get("tools") or [] if isinstance(inner, dict)
                              and inner.get("type") == "function"})
    return functions


def tokens(text: str) -> int:
    return len(text) // 4 + 1


# Replies, as JSON documents and as SSE events (name, data) -----------------------------------------------

class Ids:
    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, prefix: str) -> str:
        with self._lock:
            self._next += 1
            return f"{prefix}_scripted{self._next:06d}"


def chat_reply(body: dict, text: str, ids: Ids) -> tuple[dict, list[tuple[str | None, Any]]]:
    model, created, reply_id = body.get("model", "scripted"), int(time.time()), ids("chatcmpl")
    usage = {"prompt_tokens": tokens(prompt_of(body)[1]), "completion_tokens": tokens(text)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    document = {"id": reply_id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": line})) for line in text.splitlines(keepends=True)]
    events.append((None, chunk({}, "stop")))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**chunk({}), "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return document, events


def function_call(name: str, arguments: dict, ids: Ids, namespace: str | None = None) -> dict:
    call = {"type": "function_call", "id": ids("fc"), "call_id": ids("call"), "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}
    return {**call, "namespace": namespace} if namespace else call


def codex_named_call(body: dict, tool: dict, ids: Ids) -> dict | None:
    """The output item that calls the rule's tool, if the request offers it (an MCP tool, say)."""
    found = offered_functions(body).get(tool["name"])
    return function_call(found[1], tool.get("input", {}), ids, found[0]) if found else None


def codex_tool_call(body: dict, command: str, ids: Ids) -> dict | None:
    """The output item that makes Codex run `command` with the shell tool the request offers, if any."""
    tools = offered_tools(body)
    names = {tool.get("name") for tool in tools if tool.get("type") == "function"}
    for name in CODEX_SHELL_TOOLS:
        if name in names:
            arguments = {"shell_command": {"command": command}, "exec_command": {"cmd": command},
                         "shell": {"command": ["bash", "-lc", command]}}[name]
            return function_call(name, arguments, ids)
    if any(tool.get("type") == "local_shell" for tool in tools):
        return {"type": "local_shell_call", "id": ids("lsh"), "call_id": ids("call"), "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", command]}}
    return None


def responses_reply(body: dict, item: dict, ids: Ids) -> tuple[dict, list[tuple[str | None, Any]]]:
    response_id, model = ids("resp"), body.get("model", "scripted")
    usage = {"input_tokens": tokens(prompt_of(body)[1]), "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": tokens(json.dumps(item)), "output_tokens_details": {"reasoning_tokens": 0}}
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    response = {"id": response_id, "object": "response", "created_at": int(time.time()), "model": model,
                "status": "in_progress", "output": []}
    document = {**response, "status": "completed", "output": [item], "usage": usage}
    at = {"output_index": 0, "item_id": item["id"]}
    events: list[dict] = [{"type": "response.created", "response": response}]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        events += [{"type": "response.output_item.added", "output_index": 0,
                    "item": {**item, "status": "in_progress", "content": []}},
                   {"type": "response.content_part.added", **at, "content_index": 0, "part": part},
                   {"type": "response.output_text.delta", **at, "content_index": 0, "delta": text},
                   {"type": "response.output_text.done", **at, "content_index": 0, "text": text},
                   {"type": "response.content_part.done", **at, "content_index": 0, "part": {**part, "text": text}}]
    elif item["type"] == "function_call":
        events += [{"type": "response.output_item.added", "output_index": 0,
                    "item": {**item, "status": "in_progress", "arguments": ""}},
                   {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
                   {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]}]
    else:
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
    events += [{"type": "response.output_item.done", "output_index": 0, "item": item},
               {"type": "response.completed", "response": document}]
    numbered = [(event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events)]
    return document, numbered


def message_item(text: str, ids: Ids) -> dict:
    return {"type": "message", "id": ids("msg"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def anthropic_reply(body: dict, block: dict, ids: Ids) -> tuple[dict, list[tuple[str | None, Any]]]:
    message_id, model = ids("msg"), body.get("model", "scripted")
    usage = {"input_tokens": tokens(prompt_of(body)[1]), "output_tokens": tokens(json.dumps(block)),
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
    document = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [block],
                "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    events = [{"type": "message_start", "message": {**document, "content": [], "stop_reason": None,
                                                    "usage": {**usage, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": start},
              {"type": "content_block_delta", "index": 0, "delta": delta},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
               "usage": {"output_tokens": usage["output_tokens"]}},
              {"type": "message_stop"}]
    return document, [(event["type"], event) for event in events]


def next_turn(rule: Rule, results: list[str]) -> tuple[str, Any] | None:
    """The rule's turn a request holding these tool results is for: ("tool", its tool), then ("command", its
    command), then None (its text)."""
    command = rule.shell_command()
    turns = ([("tool", rule.tool)] if rule.tool else []) + ([("command", command)] if command is not None else [])
    return turns[len(results)] if len(results) < len(turns) else None


def with_result(command: str, results: list[str]) -> str:
    """command with {result} replaced by the last tool result's text, quoted for the shell."""
    return command.replace("{result}", shlex.quote(results[-1] if results else ""))


def codex_turn(body: dict, turn: tuple[str, Any] | None, results: list[str], ids: Ids) -> dict | None:
    """The Responses API output item that takes the turn, if the request offers its tool."""
    if turn is None:
        return None
    kind, what = turn
    if kind == "tool":
        return codex_named_call(body, what, ids)
    return codex_tool_call(body, with_result(what, results), ids)


def claude_turn(body: dict, turn: tuple[str, Any] | None, results: list[str], ids: Ids) -> dict | None:
    """The Messages API tool_use block that takes the turn, if the request offers its tool (Bash, for a command)."""
    if turn is None:
        return None
    kind, what = turn
    offered = {tool.get("name") for tool in offered_tools(body)}
    if kind == "tool" and what["name"] in offered:
        return {"type": "tool_use", "id": ids("toolu"), "name": what["name"], "input": what.get("input", {})}
    if kind == "command" and "Bash" in offered:
        return {"type": "tool_use", "id": ids("toolu"), "name": "Bash",
                "input": {"command": with_result(what, results), "description": "Run the scripted command"}}
    return None


def error_body(api: str, status: int) -> dict:
    message = f"scripted error {status}"
    if api == "messages":
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


# The server ---------------------------------------------------------------------------------------------------

ROUTES = {("POST", "/chat/completions"): "chat", ("POST", "/responses"): "responses",
          ("POST", "/messages"): "messages", ("POST", "/messages/count_tokens"): "count_tokens",
          ("GET", "/models"): "models"}


class Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.handle_request()

    def do_POST(self) -> None:  # noqa: N802
        self.handle_request()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the request log says it all

    def handle_request(self) -> None:
        self.close_connection = True  # one request per connection: nothing lingers when the server stops
        path = self.path.split("?", 1)[0]
        path = path[3:] if path.startswith("/v1/") else path
        api = ROUTES.get((self.command, path))
        raw = self.read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        record = {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                  "api_key": self.api_key(), "body": body if body is not None else raw.decode(errors="replace"),
                  "api": api}
        if api is None:
            self.server.model.record({**record, "reply": "not found"})
            return self.send_json(404, {"error": {"message": f"no route for {self.command} {path}",
                                                  "type": "not_found", "code": 404}})
        if not isinstance(body, dict):
            self.server.model.record({**record, "reply": "bad request"})
            return self.send_json(400, error_body(api, 400))
        if api == "models":
            self.server.model.record({**record, "reply": "models"})
            models = [{"id": "scripted", "object": "model", "created": 0, "owned_by": "docket"}]
            return self.send_json(200, {"object": "list", "data": models, "models": []})
        if api == "count_tokens":
            self.server.model.record({**record, "reply": "count_tokens"})
            return self.send_json(200, {"input_tokens": tokens(prompt_of(body)[1])})
        rule = self.server.model.script.rule_for(*prompt_of(body))
        record["rule"] = rule.name
        if rule.hang:
            self.server.model.record({**record, "reply": "hang"})
            self.server.model.stopping.wait()
            return
        if rule.status is not None:
            self.server.model.record({**record, "reply": "error"})
            return self.send_json(rule.status, error_body(api, rule.status))
        kind, document, events = self.reply(api, body, rule)
        self.server.model.record({**record, "reply": kind})
        if body.get("stream"):
            self.send_events(events)
        else:
            self.send_json(200, document)

    def reply(self, api: str, body: dict, rule: Rule) -> tuple[str, dict, list]:
        ids = self.server.model.ids
        if api == "chat":
            if asks_commit_message(body):
                return ("commit message", *chat_reply(body, COMMIT_MESSAGE, ids))
            return ("files" if rule.files else "text", *chat_reply(body, rule.whole_files(), ids))
        results = tool_results(body)
        turn = next_turn(rule, results)
        if api == "responses":
            call = codex_turn(body, turn, results, ids)
            return ("tool call", *responses_reply(body, call, ids)) if call else (
                "text", *responses_reply(body, message_item(rule.text, ids), ids))
        block = claude_turn(body, turn, results, ids)
        return ("tool call", *anthropic_reply(body, block, ids)) if block else (
            "text", *anthropic_reply(body, {"type": "text", "text": rule.text}, ids))

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            raw = b"".join(chunks)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        return gzip.decompress(raw) if encoding == "gzip" else zlib.decompress(raw) if encoding == "deflate" else raw

    def api_key(self) -> str | None:
        bearer = self.headers.get("Authorization", "")
        return bearer[7:] if bearer.lower().startswith("bearer ") else self.headers.get("x-api-key")

    def send_json(self, status: int, document: dict) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: list[tuple[str | None, Any]]) -> None:
        """Server-sent events; the end of the connection ends the stream."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            line = data if isinstance(data, str) else json.dumps(data)
            self.wfile.write((f"event: {name}\n" if name else "").encode() + f"data: {line}\n\n".encode())
            self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ModelServer


class ModelServer:
    """The server on 127.0.0.1, serving from a thread while the context lasts."""

    def __init__(self, script: dict | Script, port: int = 0, log: Path | str | None = None) -> None:
        self.script = script if isinstance(script, Script) else Script.parse(script)
        self.ids = Ids()
        self.stopping = threading.Event()
        self._port, self._log = port, Path(log) if log is not None else None
        self._requests: list[dict] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not running"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[dict]:
        with self._lock:
            return list(self._requests)

    def record(self, request: dict) -> None:
        with self._lock:
            self._requests.append(request)
            if self._log is not None:
                with self._log.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(request) + "\n")

    def __enter__(self) -> ModelServer:
        self._httpd = _Server(("127.0.0.1", self._port), Handler)
        self._httpd.model = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="model-server", daemon=True)  # shutdown() waits up to one poll
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()  # hanging requests end: their connections close unanswered
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="model_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", required=True, type=Path, help="the script (JSON)")
    parser.add_argument("--port", type=int, default=0, help="the port to bind on 127.0.0.1 (0: a free one)")
    parser.add_argument("--log", type=Path, help="append every request to this JSON Lines file")
    args = parser.parse_args(argv)
    try:
        script = Script.parse(json.loads(args.script.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        print(f"model_server: error: {args.script}: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ModelServer(script, args.port, args.log) as server:
        print(server.port, flush=True)
        try:
            while not stop.wait(1):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
