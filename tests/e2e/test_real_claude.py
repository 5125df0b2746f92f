"""Claude Code 2.1, the real program, end to end through `docket go`, offline.

Claude Code talks to the scripted model server of examples/model_server.py on 127.0.0.1 (the Messages API,
streamed): the server's first answer is a `tool_use` block for `Bash` with the rule's command, Claude Code runs it in
the worktree and sends its `tool_result`, and the server answers that with the rule's final text. The agent's block
is docs/agents.md's `agent: claude`, merged with its `agent-offline: claude` block, both read from the page (and, as
root, with the `IS_SANDBOX = "1"` the page asks for there).

The page's block runs it with `--permission-mode acceptEdits` (and `--allowedTools Bash`), never
`bypassPermissions`: Claude Code 2.1 refuses to write any path under a `.git` folder, and a task's workspace is a
repository of its own in docket's data folder, under none; the last test here shows where it is.
"""

from __future__ import annotations

from docket.adapters.world.files.paths import task_worktree_path
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import (ASKED, GoWorld, answer_the_question, assert_asked_answered_and_cited, asking_script,
                                docket_processes, make_go_world)

from ..agents.agents_doc import agent_block, agent_toml, marked_blocks, offline_agent

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from model_server import ModelServer  # noqa: E402

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-ant-docket-fake-0123456789abcdef"  # allow-listed by the page's block: the only key the server may see
DECOYS = {"OPENAI_API_KEY": "sk-decoy-openai-0123456789abcdef", "ANTHROPIC_AUTH_TOKEN": "decoy-anthropic-auth-token",
          "GH_TOKEN": "ghp_decoy0123456789abcdef0123456789abcd", "AWS_SECRET_ACCESS_KEY": "decoy-aws-secret-0123456789"}
RETRY = "Your previous attempt"  # what docket's feedback starts a retry's prompt with
SESSION = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

TASKS = '''\
[[tasks]]
id = "greet"
title = "a greeting"
prompt = "- Add greet.py, a program that greets (GREET-TASK)."

[[tasks]]
id = "farewell"
title = "a farewell"
prompt = "- Add farewell.py with farewell(name) (FAREWELL-TASK)."
'''
GREET = 'print("hello")\n'
FAREWELL = 'def farewell(name):\n    return "Goodbye, " + name\n'
SCRIPT = {"rules": [{"match": "GREET-TASK", "files": {"greet.py": GREET}, "text": "Wrote greet.py."},
                    {"match": "FAREWELL-TASK", "text": "Wrote farewell.py.",
                     "command": "printf 'def farewell(name):\\n    return \"Goodbye, \" + name\\n' > farewell.py"}],
          "default": {"text": "Nothing to do."}}


def claude_world(tmp_path: Path, claude_cli: Path, server: ModelServer, tasks: str = TASKS,
                 **overrides: object) -> GoWorld:
    """A repository whose docket.toml has the page's Claude Code block pointed at the server (plus overrides), the
    scripted world's `compiles` check, and the tasks; docket's environment holds the fake key and decoy secrets."""
    agent = {**offline_agent("claude", server.url), **overrides}
    if os.geteuid() == 0:  # Claude Code refuses bypassPermissions to root unless the machine says it is a sandbox
        agent["env"] = {**agent["env"], "IS_SANDBOX": "1"}
    world = make_go_world(tmp_path, target="trunk", tasks=tasks, extra_config="\n" + agent_toml("claude", agent))
    home = tmp_path / "home"
    home.mkdir()
    world.env.update(DECOYS, ANTHROPIC_API_KEY=FAKE_KEY, HOME=str(home),
                     PATH=f"{claude_cli.parent}{os.pathsep}{world.env.get('PATH', os.defpath)}")
    return world


def assert_only_the_fake_key_reached_the_server(server: ModelServer) -> None:
    requests = server.requests
    assert requests and {r["api_key"] for r in requests} == {FAKE_KEY}
    assert all(r["headers"].get("x-api-key") == FAKE_KEY and "authorization" not in r["headers"] for r in requests)
    recorded = json.dumps(requests)
    assert not [name for name, value in DECOYS.items() if value in recorded]


def worker_log(world: GoWorld, worker: str, generation: int) -> str:
    return (world.repo / ".git" / "docket" / "logs" / worker / f"{generation}.log").read_text()


def test_the_offline_block_points_the_pages_block_at_the_server_and_adds_nothing_else():
    agent = offline_agent("claude", "http://127.0.0.1:4242")
    page = tomllib.loads(agent_block("claude"))["agents"]["claude"]
    assert agent["command"] == [*page["command"], "--bare"]
    assert agent["env"] == {**page["env"], "ANTHROPIC_BASE_URL": "http://127.0.0.1:4242",
                            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    assert agent["env_allow"] == page["env_allow"] == ["ANTHROPIC_API_KEY"]
    assert (agent["prompt"], agent["report"]) == ("stdin", "claude-json")  # args appended stay options


def test_the_installed_claude_code_knows_the_offline_blocks_options(claude_cli, tmp_path):
    args = tomllib.loads(marked_blocks()["agent-offline: claude"])["args"]
    done = subprocess.run([str(claude_cli), "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    options = [arg for arg in args if arg.startswith("-")]
    assert options == ["--bare"]
    assert all(re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", done.stdout) for option in options)


def test_two_tasks_done_by_the_real_claude_code_are_delivered_and_the_receipt_verifies_offline(claude_cli,
                                                                                                tmp_path: Path):
    with ModelServer(SCRIPT) as server:
        world = claude_world(tmp_path, claude_cli, server)
        keys = tmp_path / "keys" / "docket"
        keys.parent.mkdir()
        assert world.run("key", "generate", "--out", str(keys)).returncode == 0
        done = world.go("r1", "--agent", "claude", "--target", "trunk", "--parallel", "2", "--key", f"{keys}.key")
        assert done.returncode == 0, done.stderr + done.stdout
        requests = server.requests
    summary = json.loads(done.stdout)
    rows = {row["task"]: row for row in summary["tasks"]}
    assert {task: (row["result"], row["cycles"], row["checks"]) for task, row in rows.items()} == {
        "greet": ("delivered", 1, {"compiles": "passed"}), "farewell": ("delivered", 1, {"compiles": "passed"})}
    # what Claude Code changed: exactly the file each task's command wrote, pinned as the task's candidate
    offered = {e["payload"]["task_id"]: e["payload"]["commit"] for e in world.events("HandoffOffered")}
    pinned = {e["payload"]["task_id"]: e["payload"] for e in world.events("CandidatePinned")
              if e["payload"]["commit"] == offered[e["payload"]["task_id"]]}
    base = world.events("RunBasePinned")[0]["payload"]["commit"]
    for task, path, text in (("r1.greet", "greet.py", GREET), ("r1.farewell", "farewell.py", FAREWELL)):
        candidate = pinned[task]
        assert candidate["base"] == base and candidate["changed_paths"] == [path]
        assert git(world.repo, "show", f"{candidate['commit']}:{path}") + "\n" == text
        assert candidate["tree"] == git(world.repo, "rev-parse", f"{candidate['commit']}^{{tree}}")
        files = git(world.repo, "ls-tree", "-r", "--name-only", candidate["commit"]).splitlines()
        assert sorted(files) == sorted([".gitignore", "README.md", "docket.toml", path])  # nothing of Claude's own
    # the target holds both, and each worker's Claude Code kept its configuration in its own worker folder
    assert git(world.repo, "rev-parse", "trunk") == summary["target_commit"]
    assert (world.file_at("trunk", "greet.py"), world.file_at("trunk", "farewell.py")) == (GREET, FAREWELL)
    for worker in ("r1.greet", "r1.farewell"):
        assert (world.repo / ".git" / "docket" / "workers" / worker / "1" / "claude").is_dir()
    assert not any((tmp_path / "home").iterdir())
    # the conversation: per task, a Bash tool_use, then the answer to its tool_result
    by_rule = {rule: [r["reply"] for r in requests if r.get("rule") == rule] for rule in ("0", "1")}
    assert by_rule == {"0": ["tool call", "text"], "1": ["tool call", "text"]}
    assert all(r["path"].startswith("/v1/messages") and r["body"]["stream"] for r in requests)
    tool_results = [block for r in requests for m in r["body"]["messages"] if isinstance(m["content"], list)
                    for block in m["content"] if block.get("type") == "tool_result"]
    assert len(tool_results) == 2 and not any(block.get("is_error") for block in tool_results)
    assert_only_the_fake_key_reached_the_server(server)
    # its exit and its JSON result are in the ledger
    exited = {e["payload"]["worker_id"]: e["payload"] for e in world.events("WorkerExited")}
    assert {w: (p["cause"], p["exit_code"]) for w, p in exited.items()} == {"r1.greet": ("exited", 0),
                                                                            "r1.farewell": ("exited", 0)}
    reported = {e["payload"]["worker_id"]: e["payload"] for e in world.events("AgentReported")}
    assert sorted(reported) == ["r1.farewell", "r1.greet"]
    for worker, report in reported.items():
        result = json.loads(worker_log(world, worker, 1).strip().splitlines()[-1])
        assert (result["type"], result["is_error"], result["num_turns"]) == ("result", False, 2)
        assert SESSION.match(report["session_id"]) and report["session_id"] == result["session_id"]
        assert (report["agent"], report["format"], report["turns"], report["is_error"]) == (
            "claude", "claude-json", 2, False)
        assert (report["input_tokens"], report["output_tokens"]) == (result["usage"]["input_tokens"],
                                                                     result["usage"]["output_tokens"])
        assert report["input_tokens"] > 0 and report["output_tokens"] > 0
        assert report["cost_micro_usd"] == round(result["total_cost_usd"] * 1_000_000)
    # one receipt, exported and verified offline with the public key only
    assert len(world.events("ReceiptSealed")) == 1
    verified = world.run("verify-receipt", summary["receipt"]["path"], "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stderr
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []


def test_a_claude_code_whose_model_server_never_answers_is_stopped_by_its_idle_timeout_and_retried(claude_cli,
                                                                                                    tmp_path: Path):
    tasks = '[[tasks]]\nid = "slow"\ntitle = "a greeting"\nprompt = "- Add greet.py (SLOW-TASK)."\n'
    script = {"rules": [{"match": ["SLOW-TASK", RETRY], "files": {"greet.py": GREET}, "text": "Wrote greet.py."},
                        {"match": "SLOW-TASK", "hang": True}]}  # the first attempt's request is never answered
    with ModelServer(script) as server:
        # Claude Code prints nothing until it is done: the idle timeout is what stops it, and must let a whole
        # successful run (a few seconds) through
        world = claude_world(tmp_path, claude_cli, server, tasks, idle_timeout="20s")
        done = world.go("r1", "--agent", "claude", "--target", "trunk", "--cycles", "2")
        assert done.returncode == 0, done.stderr + done.stdout
        requests = server.requests
    (row,) = json.loads(done.stdout)["tasks"]
    assert (row["result"], row["cycles"], row["checks"]) == ("delivered", 2, {"compiles": "passed"})
    assert world.file_at("trunk", "greet.py") == GREET
    exits = [(e["payload"]["generation"], e["payload"]["cause"]) for e in world.events("WorkerExited")]
    assert exits == [(1, "idle-timeout"), (2, "exited")]
    feedback = [(f["payload"]["generation"], f["payload"]["code"]) for f in world.events("TaskFeedbackRecorded")]
    assert feedback == [(1, "agent-idle-timeout")]
    # generation 1 hung on its first request; generation 2, with the feedback in its prompt, made the edit
    assert [(r.get("rule"), r["reply"]) for r in requests] == [("1", "hang"), ("0", "tool call"), ("0", "text")]
    assert RETRY in json.dumps(requests[1]["body"]["messages"])
    assert [e["payload"]["generation"] for e in world.events("AgentReported")] == [2]  # the killed one printed none
    assert_only_the_fake_key_reached_the_server(server)
    assert docket_processes(world.ledger) == []


def test_the_page_runs_claude_code_with_accept_edits_in_a_workspace_under_no_git_folder(claude_cli,
                                                                                          tmp_path: Path):
    tasks = '[[tasks]]\nid = "greet"\ntitle = "a greeting"\nprompt = "- Add greet.py (GREET-TASK)."\n'
    with ModelServer(SCRIPT) as server:
        page = offline_agent("claude", server.url)
        assert "acceptEdits" in page["command"] and "bypassPermissions" not in page["command"]
        world = claude_world(tmp_path, claude_cli, server, tasks)
        done = world.go("r1", "--agent", "claude", "--target", "trunk", "--cycles", "1")
        assert done.returncode == 0, done.stderr + done.stdout
    (row,) = json.loads(done.stdout)["tasks"]
    assert row["result"] == "delivered"
    assert world.file_at("trunk", "greet.py") == GREET
    workspace = task_worktree_path(world.repo / ".git", "r1", "r1.greet")
    assert ".git" not in workspace.parts and not workspace.is_relative_to(world.repo)
    result = json.loads(worker_log(world, "r1.greet", 1).strip().splitlines()[-1])
    assert result["permission_denials"] == []


def test_a_claude_code_whose_model_server_fails_exits_1_says_so_in_its_report_and_is_retried(claude_cli,
                                                                                             tmp_path: Path):
    tasks = '[[tasks]]\nid = "greet"\ntitle = "a greeting"\nprompt = "- Add greet.py (GREET-TASK)."\n'
    script = {"rules": [{"match": ["GREET-TASK", RETRY], "files": {"greet.py": GREET}, "text": "Wrote greet.py."},
                        {"match": "GREET-TASK", "status": 500}]}  # the first attempt's request fails
    with ModelServer(script) as server:
        page = offline_agent("claude", server.url)
        world = claude_world(tmp_path, claude_cli, server, tasks,  # no retries: the error ends the turn at once
                             env={**page["env"], "CLAUDE_CODE_MAX_RETRIES": "0"})
        done = world.go("r1", "--agent", "claude", "--target", "trunk", "--cycles", "2")
        assert done.returncode == 0, done.stderr + done.stdout
        requests = server.requests
    (row,) = json.loads(done.stdout)["tasks"]
    assert (row["result"], row["cycles"]) == ("delivered", 2)
    assert world.file_at("trunk", "greet.py") == GREET
    exits = [(e["payload"]["generation"], e["payload"]["cause"], e["payload"]["exit_code"])
             for e in world.events("WorkerExited")]
    assert exits == [(1, "exited", 1), (2, "exited", 0)]
    feedback = [(f["payload"]["generation"], f["payload"]["code"]) for f in world.events("TaskFeedbackRecorded")]
    assert feedback == [(1, "agent-failed")]
    reports = [(r["payload"]["generation"], r["payload"]["is_error"]) for r in world.events("AgentReported")]
    assert reports == [(1, True), (2, False)]
    failed = json.loads(worker_log(world, "r1.greet", 1).strip().splitlines()[-1])
    assert failed["is_error"] and "500" in failed["result"]
    assert [(r.get("rule"), r["reply"]) for r in requests] == [("1", "error"), ("0", "tool call"), ("0", "text")]
    assert_only_the_fake_key_reached_the_server(server)


def test_claude_code_asks_a_person_through_docket_mcp_and_the_answer_reaches_the_target(claude_cli, tmp_path: Path):
    """The model calls docket's ask_human tool (docket mcp, which the page's block gives Claude Code through
    --mcp-config); the test answers with docket answer; Claude Code gets the answer as the tool's result and writes
    it into name.py, which is delivered; the sealed receipt cites the question and the answer."""
    tasks = ('[[tasks]]\nid = "ask"\ntitle = "ask for the name"\n'
             'prompt = "- Ask which name the greeter uses and write it to name.py (ASK-TASK)."\n')
    script = asking_script("printf 'NAME = \"%s\"\\n' \"$(printf '%s' {result} | sed 's/^Answer from [^:]*: //')\" "
                           "> name.py")
    with ModelServer(script) as server:
        world = claude_world(tmp_path, claude_cli, server, tasks)
        keys = tmp_path / "keys" / "docket"
        keys.parent.mkdir()
        assert world.run("key", "generate", "--out", str(keys)).returncode == 0
        go = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--agent", "claude",
                         "--target", "trunk", "--key", f"{keys}.key", "--json")
        question, out, err = answer_the_question(world, go, 2, hint=lambda: server.requests[-1:])
        requests = server.requests
    assert {key: question[key] for key in ASKED} == ASKED
    assert go.returncode == 0, err + out
    summary = json.loads(out)
    (row,) = summary["tasks"]
    assert (row["result"], row["cycles"]) == ("delivered", 1)
    assert world.file_at("trunk", "name.py") == 'NAME = "bob"\n'
    # the conversation: ask_human offered and called, its result the answer; then the Bash command, then the text
    assert [r["reply"] for r in requests if r.get("rule") == "0"] == ["tool call", "tool call", "text"]
    offered = {tool["name"] for tool in requests[0]["body"]["tools"]}
    assert {"mcp__docket__ask_human", "mcp__docket__report_progress", "mcp__docket__propose_task",
            "mcp__docket__finish"} <= offered
    tool_results = [block for r in requests for m in r["body"]["messages"] if isinstance(m["content"], list)
                    for block in m["content"] if block.get("type") == "tool_result"]
    assert "bob" in json.dumps(tool_results[0]) and not tool_results[0].get("is_error")
    assert_only_the_fake_key_reached_the_server(server)
    # one question, one answer, delivered to the agent; the receipt cites them and verifies offline
    assert_asked_answered_and_cited(world, summary, keys)
    assert docket_processes(world.ledger) == []
