"""Codex CLI 0.169, for real, through `docket go`, offline: the scripted model server of examples/ answers its
Responses API requests (a call to its shell tool `exec_command`, then the final message that ends the turn), so
each task's edit is known in advance and nothing leaves 127.0.0.1.

The agent is docs/agents.md's `codex` block with its `agent-offline: codex` block merged in, both read from the
page. The tests assert what Codex changed, the candidates, the checks, the receipt verified offline with the public
key only, what the server was sent (the allow-listed fake key, nothing secret), what Codex itself saw (its
environment, dumped into the worktree by the scripted command), that each worker ran with its own CODEX_HOME in its
own worker folder, what docket recorded of Codex's JSON output (AgentReported), a failed turn retried, that a
run connects to nothing but the model server (traced with strace, where it can run), and a question asked through
docket's MCP server (the page's `mcp_servers.docket`), answered with `docket answer`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.e2e.go_world import (ASKED, GoWorld, answer_the_question, assert_asked_answered_and_cited, asking_script,
                                docket_processes, unsandboxed)

from ..agents.agents_doc import agent_toml, offline_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from model_server import ModelServer  # noqa: E402

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-docket-fake-openai-key-0123456789"
# Secret-looking variables in docket's own environment (by name, by prefix, by value): none may reach Codex or the
# model server. Every value holds LEAKED.
LEAKS = {"ANTHROPIC_API_KEY": "LEAKED-anthropic", "AWS_SECRET_ACCESS_KEY": "LEAKED-aws", "GITHUB_TOKEN": "LEAKED-gh",
         "DATABASE_PASSWORD": "LEAKED-database", "STRIPE_API_KEY": "LEAKED-stripe",
         "OPENAI_ORGANIZATION": "LEAKED-openai-org", "OPENAI_BASE_URL": "http://LEAKED-openai-base.invalid/v1",
         "BUILD_NOTE": "ghp_LEAKED0123456789abcdefghijKL"}
PLAIN = {"PLAIN_SETTING": "plain-value-passes"}  # nothing secret about it: it reaches the agent

RUNS_CHECK = f'''
[checks.runs]
command = ["for f in *.py; do {sys.executable} \\"$f\\" || exit 1; done"]
shell = true
timeout = "1m"
'''

TWO_TASKS = '''\
[[tasks]]
id = "greet"
title = "add the greeting"
prompt = "Add greet.py, a program that prints a greeting."

[[tasks]]
id = "farewell"
title = "add the farewell"
prompt = "Add farewell.py, a program that says goodbye."
'''

ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "add the greeting"\nprompt = "Add greet.py, a program that greets."\n'

WRITES = {"greet": {"greet.py": 'print("hello")\n'}, "farewell": {"farewell.py": 'print("goodbye")\n'}}
SCRIPT = {"rules": [{"match": path, "files": files, "text": f"Added {path}."}
                    for files in WRITES.values() for path in files],
          "default": {"text": "Nothing to do."}}


def codex_world(tmp_path: Path, codex: Path, server: ModelServer, *, tasks: str, checks: str,
                wrap: tuple[str, ...] = ()) -> GoWorld:
    """A repository whose docket.toml is the page's Codex agent pointed at server, docket's environment holding the
    fake key, the leaks and the plain setting; HOME a fresh folder, so anything Codex writes outside its CODEX_HOME
    shows."""
    repo = make_repo(tmp_path / "repo")
    agent = offline_agent("codex", server.url)
    agent["command"] = [*wrap, *agent["command"]]
    (repo / "docket.toml").write_text('agent = "codex"\n\n' + agent_toml("codex", agent) + checks)
    (repo / "tasks.toml").write_text(tasks)
    (repo / ".gitignore").write_text("tasks.toml\n")
    git(repo, "add", "docket.toml", ".gitignore")
    git(repo, "commit", "-q", "-m", "docket")
    git(repo, "branch", "trunk")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com", HOME=str(home), OPENAI_API_KEY=FAKE_KEY,
               PATH=f"{codex.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}", **LEAKS, **PLAIN)
    env.pop("CODEX_API_KEY", None)
    world = GoWorld(repo, env)
    done = world.run("init")
    assert done.returncode == 0, done.stderr
    return world


def signing_key(world: GoWorld, tmp_path: Path) -> Path:
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    return keys


def worker_dir(world: GoWorld, task: str, generation: int = 1) -> Path:
    return world.repo / ".git" / "docket" / "workers" / f"r1.{task}" / str(generation)


def codex_events(world: GoWorld, task: str, generation: int = 1) -> list[dict]:
    """The JSON events Codex printed (`exec --json`), from the worker's log."""
    log = world.repo / ".git" / "docket" / "logs" / f"r1.{task}" / f"{generation}.log"
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def thread_of(events: list[dict]) -> str:
    (started,) = [e for e in events if e["type"] == "thread.started"]
    return started["thread_id"]


def delivered(world: GoWorld, done: subprocess.CompletedProcess[str]) -> tuple[dict, dict[str, dict]]:
    """`docket go --json`'s summary of a delivered run, and its rows by task; trunk is at the target commit."""
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["status"]) == ("delivered", "completed")
    assert git(world.repo, "rev-parse", "trunk") == summary["target_commit"]
    return summary, {row["task"]: row for row in summary["tasks"]}


def assert_nothing_secret_reached(server: ModelServer, world: GoWorld) -> None:
    assert server.requests and {r["api_key"] for r in server.requests} == {FAKE_KEY}
    sent = json.dumps(server.requests)
    assert "LEAKED" not in sent
    for log in (world.repo / ".git" / "docket" / "logs").glob("*/*.log"):
        assert "LEAKED" not in log.read_text()


def test_two_tasks_done_by_the_real_codex_are_pinned_checked_integrated_sealed_and_the_receipt_verifies(
        tmp_path, codex_cli):
    with ModelServer(SCRIPT) as server:
        world = codex_world(tmp_path, codex_cli, server, tasks=TWO_TASKS, checks=RUNS_CHECK)
        keys = signing_key(world, tmp_path)
        done = world.go("r1", "--target", "trunk", "--parallel", "2", "--key", f"{keys}.key")
        requests = server.requests
    summary, rows = delivered(world, done)
    base = world.events("RunBasePinned")[0]["payload"]["commit"]
    pinned = {e["payload"]["binding_id"]: e["payload"] for e in world.events("CandidatePinned")}
    for task, files in WRITES.items():
        row = rows[task]
        assert (row["result"], row["cycles"], row["checks"]) == ("delivered", 1, {"runs": "passed"})
        # what Codex changed, exactly: its one new file, uncommitted, pinned on top of the run's base
        candidate = pinned[row["candidate"]]
        assert candidate["task_id"] == f"r1.{task}"
        assert (candidate["parent"], candidate["base"], candidate["changed_paths"]) == (base, base, sorted(files))
        assert git(world.repo, "ls-tree", "--name-only", candidate["commit"]).split("\n") == sorted(
            [".gitignore", "README.md", "docket.toml", *files])
        for path, text in files.items():
            assert git(world.repo, "show", f"{candidate['commit']}:{path}") + "\n" == text
            assert world.file_at("trunk", path) == text
        # Codex ran the scripted command with its shell tool, and said so in its JSON events
        events = codex_events(world, task)
        (command,) = [e["item"] for e in events if e["type"] == "item.completed"
                      and e["item"]["type"] == "command_execution"]
        assert command["exit_code"] == 0 and f"> {next(iter(files))}" in command["command"]
        assert [e["item"]["text"] for e in events if e["type"] == "item.completed"
                and e["item"]["type"] == "agent_message"] == [f"Added {next(iter(files))}."]
    assert world.file_at("trunk", "README.md") == "hello\n"
    # the server: per task, the tool call, then the follow-up carrying the command's output, answered with text
    assert len(requests) == 4 and {r["api"] for r in requests} == {"responses"}
    assert sorted((r["rule"], r["reply"]) for r in requests) == [("0", "text"), ("0", "tool call"),
                                                                ("1", "text"), ("1", "tool call")]
    for request in requests:
        assert "exec_command" in {tool.get("name") for tool in request["body"]["tools"]}
        assert request["body"]["model"] == "scripted" and request["body"]["stream"] is True
    assert_nothing_secret_reached(server, world)
    # what docket recorded of Codex's JSON output, one report per generation, next to its exit
    reports = {e["payload"]["worker_id"]: e["payload"] for e in world.events("AgentReported")}
    assert sorted(reports) == ["r1.farewell", "r1.greet"]
    for task in WRITES:
        report, events = reports[f"r1.{task}"], codex_events(world, task)
        (turn,) = [e for e in events if e["type"] == "turn.completed"]
        assert {k: report[k] for k in ("generation", "agent", "format", "session_id", "input_tokens",
                                       "output_tokens", "cost_micro_usd", "turns", "is_error")} == {
            "generation": 1, "agent": "codex", "format": "codex-jsonl", "session_id": thread_of(events),
            "input_tokens": turn["usage"]["input_tokens"], "output_tokens": turn["usage"]["output_tokens"],
            "cost_micro_usd": None, "turns": 1, "is_error": False}
        assert turn["usage"]["input_tokens"] > 0
    assert {e["payload"]["exit_code"] for e in world.events("WorkerExited")} == {0}
    # one receipt, exported and verified offline with the public key only
    assert len(world.events("ReceiptSealed")) == 1
    verified = world.run("verify-receipt", summary["receipt"]["path"], "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []


def test_each_codex_sees_only_what_the_allow_list_passes_and_has_its_own_codex_home_in_its_worker_folder(
        tmp_path, codex_cli):
    tasks = '''\
[[tasks]]
id = "one"
title = "record the environment"
prompt = "Write your environment into one.env."

[[tasks]]
id = "two"
title = "record the environment too"
prompt = "Write your environment into two.env."
'''
    script = {"rules": [{"match": "one.env", "command": "env > one.env"},
                        {"match": "two.env", "command": "env > two.env"}]}
    check = '''
[checks.no-leak]
command = ["ls *.env && ! grep -l LEAKED *.env"]
shell = true
timeout = "1m"
'''
    with ModelServer(script) as server:
        world = codex_world(tmp_path, codex_cli, server, tasks=tasks, checks=check)
        done = world.go("r1", "--target", "trunk", "--parallel", "2")
        assert_nothing_secret_reached(server, world)
        sessions = {r["headers"]["session-id"] for r in server.requests}
    _, rows = delivered(world, done)
    assert {rows[task]["checks"]["no-leak"] for task in ("one", "two")} == {"passed"}
    homes = []
    for task in ("one", "two"):
        text = world.file_at("trunk", f"{task}.env")
        seen = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        # the allow-list, nothing more: the fake key; no leak by name or value; the plain setting passes, so Codex
        # hands its commands the environment it got (the scrub was docket's)
        assert seen["OPENAI_API_KEY"] == FAKE_KEY
        assert "LEAKED" not in text and not set(LEAKS) & set(seen)
        assert seen["PLAIN_SETTING"] == PLAIN["PLAIN_SETTING"]
        assert (seen["DOCKET_RUN"], seen["DOCKET_TASK"]) == ("r1", f"r1.{task}")
        # its config home is its own worker folder, and Codex kept its session there
        home = Path(seen["CODEX_HOME"])
        assert home == worker_dir(world, task)
        thread = thread_of(codex_events(world, task))
        assert seen["CODEX_THREAD_ID"] == thread
        assert [p.name for p in (home / "sessions").rglob(f"rollout-*{thread}.jsonl")]
        homes.append(home)
    assert homes[0] != homes[1]
    assert sessions == {thread_of(codex_events(world, task)) for task in ("one", "two")}
    assert list((tmp_path / "home").iterdir()) == []  # nothing of Codex in docket's HOME


def test_codex_in_its_workspace_write_sandbox_commits_and_the_commit_is_delivered(tmp_path, codex_cli):
    """The workspace's git dir is inside the workspace, so Codex's own sandbox lets its `git commit` write it; the
    commit (its objects only in the workspace) is brought into the repository when docket pins."""
    command = ("printf 'print(\\\"hello\\\")\\n' > greet.py && git add greet.py && "
               "git -c user.name=codex -c user.email=codex@example.com commit -q -m 'codex: greet'")
    script = {"rules": [{"match": "greet.py", "command": command, "text": "Committed greet.py."}]}
    with ModelServer(script) as server:
        world = codex_world(tmp_path, codex_cli, server, tasks=ONE_TASK, checks=RUNS_CHECK)
        # docket's sandbox off, Codex's own on, as the page says for that case
        config = (world.repo / "docket.toml").read_text()
        assert '"--sandbox", "danger-full-access"' in config
        (world.repo / "docket.toml").write_text(unsandboxed(config.replace(
            '"--sandbox", "danger-full-access"', '"--sandbox", "workspace-write", "-c", '
            "'sandbox_workspace_write.writable_roots=[\"{worktree}/.git\"]'")))
        git(world.repo, "commit", "-q", "-am", "codex in its own sandbox")
        done = world.go("r1", "--target", "trunk", "--cycles", "1")
    _, rows = delivered(world, done)
    (command_run,) = [e["item"] for e in codex_events(world, "greet") if e["type"] == "item.completed"
                      and e["item"]["type"] == "command_execution"]
    assert command_run["exit_code"] == 0, command_run
    candidate = {e["payload"]["binding_id"]: e["payload"] for e in world.events("CandidatePinned")}[
        rows["greet"]["candidate"]]
    base = world.events("RunBasePinned")[0]["payload"]["commit"]
    assert candidate["parent"] != base  # pinned on Codex's own commit
    assert git(world.repo, "log", "-1", "--format=%s", candidate["parent"]) == "codex: greet"
    assert world.file_at("trunk", "greet.py") == 'print("hello")\n'
    assert rows["greet"]["result"] == "delivered"


def test_a_codex_whose_server_fails_exits_1_and_its_retry_is_delivered(tmp_path, codex_cli):
    script = {"rules": [{"match": ["greet.py", "Your previous attempt"], "files": WRITES["greet"]},
                        {"match": "greet.py", "status": 500}]}
    with ModelServer(script) as server:
        world = codex_world(tmp_path, codex_cli, server, tasks=ONE_TASK, checks=RUNS_CHECK)
        done = world.go("r1", "--target", "trunk", "--cycles", "2")
        replies = [r["reply"] for r in server.requests]
    _, rows = delivered(world, done)
    assert (rows["greet"]["result"], rows["greet"]["cycles"]) == ("delivered", 2)
    assert replies == ["error", "tool call", "text"]  # no retries inside Codex: one failed request, then generation 2
    exits = [(e["payload"]["generation"], e["payload"]["exit_code"]) for e in world.events("WorkerExited")]
    assert exits == [(1, 1), (2, 0)]
    (feedback,) = world.events("TaskFeedbackRecorded")
    assert (feedback["payload"]["generation"], feedback["payload"]["code"]) == (1, "agent-failed")
    failed = codex_events(world, "greet", 1)
    assert [e["type"] for e in failed][-2:] == ["error", "turn.failed"]
    reports = [(e["payload"]["generation"], e["payload"]["is_error"], e["payload"]["session_id"])
               for e in world.events("AgentReported")]
    assert reports == [(1, True, thread_of(failed)), (2, False, thread_of(codex_events(world, "greet", 2)))]
    assert world.file_at("trunk", "greet.py") == WRITES["greet"]["greet.py"]


def test_a_codex_run_connects_to_nothing_but_the_model_server(tmp_path, codex_cli):
    if shutil.which("strace") is None or subprocess.run(["strace", "-f", "-o", os.devnull, "true"],
                                                        capture_output=True).returncode:
        pytest.skip("strace is not installed or cannot trace here")
    trace = ("strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmmsg", "-e", "signal=none",
             "-o", "{worker_dir}/network.trace")  # wraps the agent's command: every process it starts is traced
    with ModelServer(SCRIPT) as server:
        world = codex_world(tmp_path, codex_cli, server, tasks=ONE_TASK, checks=RUNS_CHECK, wrap=trace)
        done = world.go("r1", "--target", "trunk")
        port = server.port
        assert [r["reply"] for r in server.requests] == ["tool call", "text"]
    assert delivered(world, done)[1]["greet"]["result"] == "delivered"
    calls = (worker_dir(world, "greet") / "network.trace").read_text().splitlines()
    to_network = [call for call in calls if "sa_family=AF_INET" in call]  # AF_INET and AF_INET6: connect, sendto
    model_server = f'sin_port=htons({port}), sin_addr=inet_addr("127.0.0.1")'
    assert to_network and [call for call in to_network if model_server not in call] == []  # no DNS, no other host


def test_codex_asks_a_person_through_docket_mcp_and_the_answer_reaches_the_target(tmp_path, codex_cli):
    """The model calls docket's ask_human (docket mcp, which the page's block gives Codex as the MCP server
    docket); the test answers with docket answer; Codex gets the answer as the tool's output, and its shell
    command writes it into name.py, which is delivered; the sealed receipt cites the question and the answer."""
    tasks = ('[[tasks]]\nid = "ask"\ntitle = "ask for the name"\n'
             'prompt = "Ask which name the greeter uses and write it to name.py (ASK-TASK)."\n')
    # Codex sends the tool's output after a "Wall time" line: the answer is the line docket wrote
    script = asking_script("printf 'NAME = \"%s\"\\n' \"$(printf '%s\\n' {result} "
                           "| sed -n 's/^Answer from [^:]*: //p')\" > name.py")
    with ModelServer(script) as server:
        world = codex_world(tmp_path, codex_cli, server, tasks=tasks, checks=RUNS_CHECK)
        keys = signing_key(world, tmp_path)
        go = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--target", "trunk",
                         "--key", f"{keys}.key", "--json")
        question, out, err = answer_the_question(world, go, 2, hint=lambda: server.requests[-1:])
        requests = server.requests
    assert {key: question[key] for key in ASKED} == ASKED
    summary, rows = delivered(world, subprocess.CompletedProcess(go.args, go.returncode, out, err))
    assert (rows["ask"]["result"], rows["ask"]["cycles"], rows["ask"]["checks"]) == ("delivered", 1,
                                                                                     {"runs": "passed"})
    assert world.file_at("trunk", "name.py") == 'NAME = "bob"\n'
    # the conversation: docket's tools offered in the namespace mcp__docket from the first request on, ask_human
    # called, its output the answer; then the shell command, then the final message
    assert [(r["rule"], r["reply"]) for r in requests] == [("0", "tool call"), ("0", "tool call"), ("0", "text")]
    (namespace,) = [tool for tool in requests[0]["body"]["tools"] if tool.get("name") == "mcp__docket"]
    assert namespace["type"] == "namespace"
    assert {tool["name"] for tool in namespace["tools"]} == {"ask_human", "report_progress", "propose_task", "finish"}
    outputs = {item["call_id"]: item["output"] for item in requests[-1]["body"]["input"]
               if item.get("type") == "function_call_output"}
    (ask,) = [item for item in requests[-1]["body"]["input"] if item.get("type") == "function_call"
              and item.get("namespace") == "mcp__docket"]
    said = json.dumps(outputs[ask["call_id"]])  # a list of input_text items: a "Wall time" line, then the answer
    assert ask["name"] == "ask_human" and re.search(r"Answer from [^:]+: bob", said)
    assert_nothing_secret_reached(server, world)
    # what Codex said it did: the MCP call, answered, then the command
    items = [e["item"] for e in codex_events(world, "ask") if e["type"] == "item.completed"]
    (call,) = [item for item in items if item["type"] == "mcp_tool_call"]
    assert (call["server"], call["tool"], call["status"], call["error"]) == ("docket", "ask_human", "completed", None)
    assert call["arguments"] == script["rules"][0]["tool"]["input"]
    (command,) = [item for item in items if item["type"] == "command_execution"]
    assert command["exit_code"] == 0 and "> name.py" in command["command"]
    # one question, one answer, delivered to the agent; the receipt cites them and verifies offline
    assert_asked_answered_and_cited(world, summary, keys)
    assert docket_processes(world.ledger) == []
