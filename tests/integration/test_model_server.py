"""examples/model_server.py, driven by a plain urllib client: the three APIs streamed and not, the tool call
then its follow-up (a rule's own tool, an MCP server's, called first), the hang and error switches, the request
log with the key each request carried, 404s, and the command line."""

from __future__ import annotations

import gzip
import http.client
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_SERVER = ROOT / "examples" / "model_server.py"
CLIENT_TIMEOUT = 30  # seconds; only the hang test waits for a timeout, a short one

GREET = "def greet(name):\n    return 'Hello, ' + name\n"
SCRIPT = {
    "rules": [
        {"match": "greeting", "files": {"greet.py": GREET}, "text": "Added the greeting."},
        {"match": "farewell", "command": "printf 'bye\\n' > bye.txt", "text": "Said goodbye."},
        {"match": ["retry", "Your previous attempt"], "text": "Second try."},
        {"match": "stall", "hang": True},
        {"match": "break", "status": 500},
    ],
    "default": {"text": "Nothing to do."},
}


def load_module() -> ModuleType:
    name = "examples_model_server"
    if name not in sys.modules:  # dataclasses look their module up there
        spec = importlib.util.spec_from_file_location(name, MODEL_SERVER)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


ms = load_module()


@pytest.fixture
def server(tmp_path: Path):
    with ms.ModelServer(SCRIPT, log=tmp_path / "requests.jsonl") as server:
        yield server


def call(server, path: str, body: dict | None = None, headers: dict | None = None,
         timeout: float = CLIENT_TIMEOUT) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, headers={"Content-Type": "application/json",
                                                                            **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def post_json(server, path: str, body: dict, **kwargs) -> dict:
    status, text = call(server, path, body, **kwargs)
    assert status == 200, text
    return json.loads(text)


def post_events(server, path: str, body: dict, **kwargs) -> list[tuple[str | None, object]]:
    """(event name, data) for each server-sent event; data is JSON, or the raw text ([DONE])."""
    status, text = call(server, path, {**body, "stream": True}, **kwargs)
    assert status == 200, text
    events = []
    for chunk in text.split("\n\n"):
        if not chunk.strip():
            continue
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = fields["data"]
        events.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
    return events


def user(text: str) -> dict:
    return {"role": "user", "content": text}


# OpenAI Chat Completions, as aider uses it -------------------------------------------------------------------

WHOLE_FILE_REPLY = f"Added the greeting.\ngreet.py\n```\n{GREET}```\n"


def test_chat_replies_with_the_files_whole_in_aiders_format(server):
    body = {"model": "scripted", "messages": [{"role": "system", "content": "Act as an expert."},
                                              user("Add a greeting to greet.py")]}
    reply = post_json(server, "/v1/chat/completions", body)
    assert reply["object"] == "chat.completion"
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": WHOLE_FILE_REPLY}
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]


def test_chat_streams_the_same_reply_in_chunks_then_done(server):
    body = {"model": "scripted", "messages": [user("Add a greeting")], "stream_options": {"include_usage": True}}
    events = post_events(server, "/v1/chat/completions", body)
    assert events[-1] == (None, "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == WHOLE_FILE_REPLY
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_chat_finds_the_match_anywhere_in_the_messages(server):
    messages = [user("Here is the greeting file."), {"role": "assistant", "content": "Ok."}, user("Go ahead.")]
    body = {"model": "scripted", "messages": messages}
    assert post_json(server, "/v1/chat/completions", body)["choices"][0]["message"]["content"] == WHOLE_FILE_REPLY


def test_chat_answers_aiders_commit_message_request_with_one_line(server):
    body = {"model": "scripted", "messages": [
        {"role": "system", "content": "You are an expert software engineer.\nReview the provided context and "
                                      "diffs which are about to be committed to a git repo.\nGenerate a commit "
                                      "message for those changes which follows the Conventional Commits guidelines"},
        user("# Context:\nUSER: Add a greeting\n# Diffs:\n+def greet(name):")]}
    assert post_json(server, "/v1/chat/completions", body)["choices"][0]["message"]["content"] == ms.COMMIT_MESSAGE
    assert server.requests[-1]["reply"] == "commit message"


def test_a_command_rule_gives_aider_only_its_text(server):
    body = {"model": "scripted", "messages": [user("Say farewell")]}
    assert post_json(server, "/v1/chat/completions", body)["choices"][0]["message"]["content"] == "Said goodbye."


# OpenAI Responses API, as Codex CLI uses it ------------------------------------------------------------------

def codex_request(text: str, tools: list[dict], extra_input: list[dict] = ()) -> dict:
    return {"model": "scripted", "instructions": "You are Codex.", "tools": tools, "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        *extra_input]}


def function_tool(name: str) -> dict:
    return {"type": "function", "name": name, "description": "", "strict": False, "parameters": {"type": "object"}}


@pytest.mark.parametrize(("tool", "arguments"), [
    (function_tool("shell_command"), {"command": "printf 'bye\\n' > bye.txt"}),
    (function_tool("exec_command"), {"cmd": "printf 'bye\\n' > bye.txt"}),
    (function_tool("shell"), {"command": ["bash", "-lc", "printf 'bye\\n' > bye.txt"]}),
])
def test_responses_stream_a_call_of_the_shell_tool_codex_offers(server, tool, arguments):
    events = post_events(server, "/v1/responses", codex_request("Say farewell", [function_tool("apply_patch"), tool]))
    assert [name for name, _ in events] == [
        "response.created", "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    item = events[4][1]["item"]
    assert item["type"] == "function_call" and item["name"] == tool["name"]
    assert json.loads(item["arguments"]) == arguments
    assert events[2][1]["delta"] == item["arguments"] and events[2][1]["item_id"] == item["id"]
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and completed["output"] == [item]
    usage = completed["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_responses_call_local_shell_when_that_is_the_tool_offered(server):
    events = post_events(server, "/v1/responses", codex_request("Say farewell", [{"type": "local_shell"}]))
    item = events[-2][1]["item"]
    assert item["type"] == "local_shell_call" and item["status"] == "completed"
    assert item["action"] == {"type": "exec", "command": ["bash", "-lc", "printf 'bye\\n' > bye.txt"]}


def test_responses_answer_the_tools_output_with_the_final_message(server):
    first = post_events(server, "/v1/responses", codex_request("Say farewell", [function_tool("shell_command")]))
    call = first[-2][1]["item"]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "Exit code: 0"}
    events = post_events(server, "/v1/responses",
                         codex_request("Say farewell", [function_tool("shell_command")], [call, output]))
    assert [name for name, _ in events] == [
        "response.created", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert events[3][1]["delta"] == "Said goodbye."
    assert events[-2][1]["item"]["content"] == [{"type": "output_text", "text": "Said goodbye.", "annotations": []}]
    assert [r["reply"] for r in server.requests] == ["tool call", "text"]


def test_responses_not_streamed_and_without_a_shell_tool_give_a_message(server):
    reply = post_json(server, "/v1/responses", codex_request("Say farewell", []))
    assert reply["object"] == "response" and reply["status"] == "completed"
    assert [item["type"] for item in reply["output"]] == ["message"]
    assert reply["output"][0]["content"][0]["text"] == "Said goodbye."


ASK = {"name": "mcp__docket__ask_human",
       "input": {"question": "Which name?", "reason": "choice", "choices": ["ada", "bob"]}}
ASK_SCRIPT = {"rules": [{"match": "ask", "tool": ASK, "command": "printf '%s\\n' {result} > answer.txt",
                         "text": "Wrote the answer."}]}


def namespace_tool(name: str, *functions: str) -> dict:
    return {"type": "namespace", "name": name, "description": "", "tools": [function_tool(f) for f in functions]}


def test_responses_call_the_rules_tool_in_its_namespace_then_the_command_with_its_result_then_the_text():
    """Codex offers an MCP server's tools as the functions of a namespace mcp__SERVER: the rule's tool
    mcp__docket__ask_human is called as ask_human in mcp__docket; its output fills {result} in the command."""
    tools = [function_tool("exec_command"), namespace_tool("mcp__docket", "report_progress", "ask_human")]
    with ms.ModelServer(ASK_SCRIPT) as server:
        first = post_events(server, "/v1/responses", codex_request("ask for it", tools))
        ask = first[-2][1]["item"]
        answered = [ask, {"type": "function_call_output", "call_id": ask["call_id"],
                          "output": "Wall time: 0.1 seconds\nOutput:\nAnswer from ada: it's bob"}]
        second = post_json(server, "/v1/responses", codex_request("ask for it", tools, answered))
        (command,) = second["output"]
        ran = [command, {"type": "function_call_output", "call_id": command["call_id"], "output": "exit 0"}]
        third = post_json(server, "/v1/responses", codex_request("ask for it", tools, [*answered, *ran]))
        replies = [r["reply"] for r in server.requests]
    assert (ask["type"], ask["namespace"], ask["name"]) == ("function_call", "mcp__docket", "ask_human")
    assert json.loads(ask["arguments"]) == ASK["input"] and ask["status"] == "completed"
    assert first[2][1]["delta"] == ask["arguments"]
    assert (command["name"], "namespace" in command) == ("exec_command", False)
    assert json.loads(command["arguments"]) == {
        "cmd": "printf '%s\\n' 'Wall time: 0.1 seconds\nOutput:\nAnswer from ada: it'\"'\"'s bob' > answer.txt"}
    assert third["output"][0]["content"][0]["text"] == "Wrote the answer."
    assert replies == ["tool call", "tool call", "text"]


def test_responses_call_a_function_tool_of_the_rules_tools_name_and_skip_a_tool_not_offered():
    with ms.ModelServer(ASK_SCRIPT) as server:
        plain = post_json(server, "/v1/responses", codex_request("ask for it", [function_tool(ASK["name"])]))
        elsewhere = post_json(server, "/v1/responses", codex_request(
            "ask for it", [namespace_tool("mcp__other", "ask_human")]))
    (call,) = plain["output"]
    assert (call["name"], "namespace" in call, json.loads(call["arguments"])) == (ASK["name"], False, ASK["input"])
    assert [item["type"] for item in elsewhere["output"]] == ["message"]  # neither the tool nor a shell: the text


def test_files_become_a_command_that_writes_them_exactly(server, tmp_path):
    files = {"greet.py": GREET, "docs/it's.md": "quotes ' \" $HOME `x` \\n and no newline"}
    with ms.ModelServer({"rules": [{"match": "write", "files": files}]}) as other:
        reply = post_json(other, "/v1/responses", codex_request("write them", [function_tool("shell_command")]))
    command = json.loads(reply["output"][0]["arguments"])["command"]
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["bash", "-c", command], cwd=work, check=True)
    assert {str(p.relative_to(work)): p.read_text() for p in work.rglob("*") if p.is_file()} == files


# Anthropic Messages API, as Claude Code uses it ---------------------------------------------------------------

def claude_request(content: list | str, tools: tuple[str, ...] = ("Bash", "Read"), history: list[dict] = ()) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "system": [{"type": "text", "text": "You are Claude."}],
            "tools": [{"name": name, "input_schema": {"type": "object"}} for name in tools],
            "messages": [*history, {"role": "user", "content": content}]}


PROMPT_BLOCKS = [{"type": "text", "text": "<system-reminder>context</system-reminder>"},
                 {"type": "text", "text": "Say farewell"}]


def test_messages_stream_a_bash_tool_use_with_the_command(server):
    events = post_events(server, "/v1/messages?beta=true", claude_request(PROMPT_BLOCKS))
    assert [name for name, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                            "content_block_stop", "message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in events)
    start = events[1][1]["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Bash" and start["input"] == {}
    delta = events[2][1]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"])["command"] == "printf 'bye\\n' > bye.txt"
    assert events[4][1]["delta"]["stop_reason"] == "tool_use"
    assert events[0][1]["message"]["model"] == "claude-sonnet-4-5"


def test_messages_answer_the_tool_result_with_the_final_text(server):
    first = post_json(server, "/v1/messages", claude_request(PROMPT_BLOCKS))
    tool_use = first["content"][0]
    assert first["stop_reason"] == "tool_use" and tool_use["type"] == "tool_use"
    history = [{"role": "user", "content": PROMPT_BLOCKS}, {"role": "assistant", "content": [tool_use]}]
    result = [{"type": "tool_result", "tool_use_id": tool_use["id"], "content": "", "is_error": False}]
    events = post_events(server, "/v1/messages", claude_request(result, history=history))
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "Said goodbye."}
    assert events[4][1]["delta"]["stop_reason"] == "end_turn"


def test_messages_call_the_rules_tool_then_bash_with_its_result_then_the_text():
    with ms.ModelServer(ASK_SCRIPT) as server:
        tools = ("Bash", ASK["name"])
        first = post_json(server, "/v1/messages", claude_request("ask for it", tools))
        (ask,) = first["content"]
        history = [{"role": "user", "content": "ask for it"}, {"role": "assistant", "content": [ask]}]
        result = [{"type": "tool_result", "tool_use_id": ask["id"], "content": [{"type": "text", "text": "bob"}]}]
        second = post_json(server, "/v1/messages", claude_request(result, tools, history))
        (bash,) = second["content"]
        history += [{"role": "user", "content": result}, {"role": "assistant", "content": [bash]}]
        done = [{"type": "tool_result", "tool_use_id": bash["id"], "content": ""}]
        third = post_json(server, "/v1/messages", claude_request(done, tools, history))
    assert (ask["type"], ask["name"], ask["input"]) == ("tool_use", ASK["name"], ASK["input"])
    assert (bash["name"], bash["input"]["command"]) == ("Bash", "printf '%s\\n' bob > answer.txt")
    assert third["content"] == [{"type": "text", "text": "Wrote the answer."}]


def test_messages_without_the_bash_tool_get_text(server):
    """Claude Code's side requests (a title with a small model) offer no tools: they get the rule's text."""
    reply = post_json(server, "/v1/messages", claude_request("Say farewell", tools=()))
    assert reply["content"] == [{"type": "text", "text": "Said goodbye."}] and reply["stop_reason"] == "end_turn"


def test_count_tokens_and_models_are_answered(server):
    assert post_json(server, "/v1/messages/count_tokens", claude_request("Say farewell"))["input_tokens"] > 0
    status, text = call(server, "/v1/models")
    assert status == 200 and json.loads(text)["data"][0]["object"] == "model"


# Rules, switches, log ----------------------------------------------------------------------------------------

def test_the_last_user_message_wins_over_earlier_text(server):
    history = [user("Add a greeting"), {"role": "assistant", "content": "Done."}]
    body = {"model": "scripted", "messages": [*history, user("Now say farewell")]}
    assert post_json(server, "/v1/chat/completions", body)["choices"][0]["message"]["content"] == "Said goodbye."


def test_a_list_match_needs_every_part_and_nothing_matching_gives_the_default(server):
    def ask(text: str) -> str:
        return post_json(server, "/v1/messages", claude_request(text, tools=()))["content"][0]["text"]

    assert ask("retry\n---\nYour previous attempt (generation 1) was not accepted") == "Second try."
    assert ask("retry") == "Nothing to do."
    assert [r["rule"] for r in server.requests] == ["2", "default"]


def test_a_status_rule_gives_the_apis_json_error(server):
    status, text = call(server, "/v1/messages", claude_request("break it"))
    assert status == 500 and json.loads(text)["type"] == "error" and json.loads(text)["error"]["type"] == "api_error"
    status, text = call(server, "/v1/responses", codex_request("break it", []))
    assert status == 500 and json.loads(text)["error"]["message"]
    assert [r["reply"] for r in server.requests] == ["error", "error"]


def test_a_hanging_request_times_the_client_out_and_the_server_still_stops():
    with ms.ModelServer(SCRIPT) as server:
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            call(server, "/v1/chat/completions", {"model": "m", "stream": True, "messages": [user("stall")]},
                 timeout=0.5)
        assert server.requests[-1]["reply"] == "hang"
    with pytest.raises(urllib.error.URLError):  # stopped: nothing listens there any more
        call(server, "/v1/models", timeout=5)


def test_every_request_is_logged_with_the_key_it_carried(server, tmp_path):
    call(server, "/v1/chat/completions", {"model": "m", "messages": [user("hi")]},
         headers={"Authorization": "Bearer sk-fake-openai"})
    call(server, "/v1/messages", claude_request("hi"), headers={"x-api-key": "sk-ant-fake"})
    call(server, "/v1/unknown", {"x": 1})
    requests = server.requests
    assert [(r["method"], r["path"], r["api_key"]) for r in requests] == [
        ("POST", "/v1/chat/completions", "sk-fake-openai"), ("POST", "/v1/messages", "sk-ant-fake"),
        ("POST", "/v1/unknown", None)]
    assert requests[0]["headers"]["authorization"] == "Bearer sk-fake-openai"
    assert requests[1]["body"]["model"] == "claude-sonnet-4-5" and requests[2]["reply"] == "not found"
    logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert logged == requests


def test_a_chunked_gzip_body_is_read(server):
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=CLIENT_TIMEOUT)
    body = gzip.compress(json.dumps({"model": "m", "messages": [user("Say farewell")]}).encode())
    connection.request("POST", "/v1/chat/completions", body=iter([body[:10], body[10:]]),
                       headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, encode_chunked=True)
    reply = connection.getresponse()
    assert reply.status == 200 and json.loads(reply.read())["choices"][0]["message"]["content"] == "Said goodbye."
    connection.close()
    assert server.requests[-1]["headers"]["transfer-encoding"] == "chunked"


def test_unknown_paths_get_a_404_json_error(server):
    status, text = call(server, "/v1/completions", {"prompt": "x"})
    assert status == 404 and "no route" in json.loads(text)["error"]["message"]
    status, text = call(server, "/v1/responses")  # GET of a POST route
    assert status == 404 and json.loads(text)["error"]["code"] == 404


@pytest.mark.parametrize("script", [
    {"rules": [{"files": {"a": "b"}}]},  # no match
    {"rules": [{"match": "x", "colour": "red"}]},  # a typo
    {"rules": [{"match": "x", "status": 200}]},
    {"rules": [{"match": "x", "files": ["a"]}]},
    {"rules": [{"match": "x", "command": ["ls"]}]},
    {"rule": []},
])
def test_a_script_it_does_not_understand_is_refused(script):
    with pytest.raises(ms.ScriptError):
        ms.Script.parse(script)


def test_the_command_line_prints_its_port_serves_and_stops_on_sigterm(tmp_path):
    script, log = tmp_path / "script.json", tmp_path / "log.jsonl"
    script.write_text(json.dumps(SCRIPT))
    process = subprocess.Popen([sys.executable, str(MODEL_SERVER), "--script", str(script), "--log", str(log)],
                               stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        server = type("Running", (), {"url": f"http://127.0.0.1:{port}"})()
        reply = post_json(server, "/v1/chat/completions", {"model": "m", "messages": [user("Add a greeting")]})
        assert reply["choices"][0]["message"]["content"] == WHOLE_FILE_REPLY
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=CLIENT_TIMEOUT) == 0
        process.stdout.close()
    assert json.loads(log.read_text())["api_key"] is None


def test_the_command_line_refuses_a_bad_script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text('{"rules": [{"match": ""}]}')
    done = subprocess.run([sys.executable, str(MODEL_SERVER), "--script", str(script)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("model_server: error: ")
