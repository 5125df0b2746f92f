"""A repository for `docket go` tests: the scripted agent of examples/, a check, three tasks, the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import git, make_repo
from tests.logged_events import logged_events

AGENT = Path(__file__).resolve().parents[2] / "examples" / "scripted_agent.py"

# Three tasks: `name` fails its check once and is repaired; `shout` starts from the work of `greet`.
TASKS = '''\
[[tasks]]
id = "greet"
title = "add the greeting"
prompt = """Add a program that greets.
write greet.py: print("hello")
"""

[[tasks]]
id = "name"
title = "name the greeter"
prompt = """Name the greeter.
first attempt: write name.py: NAME = broken
write name.py: NAME = "docket"
"""

[[tasks]]
id = "shout"
title = "shout the greeting too"
depends_on = ["greet"]
prompt = """Shout it as well.
append greet.py: print("HELLO")
"""
'''

# The tree the target ends with when all three are delivered (besides what the repository had).
DELIVERED = {"greet.py": 'print("hello")\nprint("HELLO")\n', "name.py": 'NAME = "docket"\n'}


def _sandbox_off_without_landlock() -> str:
    """Where the kernel has no Landlock, docket refuses to launch unless told sandbox = "off": these worlds test
    everything but the sandbox (tests/attacks/ tests it, and says when it cannot)."""
    from docket.adapters.world.processes.landlock import abi_version

    return "" if abi_version() >= 1 else 'sandbox = "off"\n'


_SANDBOX_OFF_WITHOUT_LANDLOCK = _sandbox_off_without_landlock()


def unsandboxed(text: str) -> str:
    """A docket.toml with sandbox = "off" (once): for attacks on what docket does when no sandbox stands in the way."""
    return 'sandbox = "off"\n' + "".join(line for line in text.splitlines(keepends=True)
                                        if line.strip() != 'sandbox = "off"')


def config(*, idle_timeout: str = "30s", extra: str = "", agent_extra: str = "") -> str:
    return f'''\
{_SANDBOX_OFF_WITHOUT_LANDLOCK}agent = "scripted"

[agents.scripted]
command = ["{sys.executable}", "{AGENT}", "--prompt-file", "{{prompt_file}}"]
prompt = "file"
idle_timeout = "{idle_timeout}"
{agent_extra}

[checks.compiles]
command = ["! grep -rq broken --include=*.py . && {sys.executable} -c 'import ast, sys; [ast.parse(open(f).read()) for f in sys.argv[1:]]' *.py"]
shell = true
timeout = "1m"
{extra}'''


@dataclass
class GoWorld:
    repo: Path
    env: dict[str, str] = field(default_factory=dict)
    program: tuple[str, ...] = (sys.executable, "-m", "docket")  # the docket it runs (an installed one's bin/docket)

    @property
    def ledger(self) -> Path:
        return self.repo / ".git" / "docket" / "ledger.sqlite"

    def argv(self, *args: str) -> list[str]:
        return [*self.program, *args]

    def run(self, *args: str, fault: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if fault:
            env["DOCKET_FAULT"] = fault
        return subprocess.run(self.argv(*args), cwd=self.repo, env=env, capture_output=True, text=True,
                              timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), cwd=self.repo, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def json(self, *args: str) -> dict:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def go(self, run_id: str, *extra: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.run("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", run_id, "--json", *extra,
                        fault=fault)

    def resume(self, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("go", "--resume", run_id, "--json", *extra)

    def events(self, type_name: str) -> list[dict]:
        return [e for e in self.all_events() if e["type"].split(".")[0] == type_name]

    def all_events(self) -> list[dict]:
        """Every event, as `docket log --json` lists them: read in this process (tests/logged_events.py), or by
        docket log itself for a ledger elsewhere (PostgreSQL, DOCKET_LEDGER)."""
        if "DOCKET_DATABASE_URL" in self.env or "DOCKET_LEDGER" in self.env or not self.ledger.exists():
            listed = self.run("log", "--json")
            assert listed.returncode == 0, listed.stderr
            return json.loads(listed.stdout)["events"]
        return logged_events(self.ledger)

    def tree_of(self, branch: str) -> str:
        return git(self.repo, "rev-parse", f"{branch}^{{tree}}")

    def file_at(self, branch: str, path: str) -> str:
        return git(self.repo, "show", f"{branch}:{path}") + "\n"


def make_go_world(tmp_path: Path, *, name: str = "repo", target: str = "main", idle_timeout: str = "30s",
                  extra_config: str = "", tasks: str = TASKS, agent_extra: str = "",
                  program: tuple[str, ...] | None = None) -> GoWorld:
    repo = make_repo(tmp_path / name)
    (repo / "docket.toml").write_text(config(idle_timeout=idle_timeout, extra=extra_config, agent_extra=agent_extra))
    (repo / "tasks.toml").write_text(tasks)
    (repo / ".gitignore").write_text("tasks.toml\n")
    git(repo, "add", "docket.toml", ".gitignore")
    git(repo, "commit", "-q", "-m", "docket")
    if target != "main":
        git(repo, "branch", target)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    world = GoWorld(repo, env) if program is None else GoWorld(repo, env, program)
    done = world.run("init")
    assert done.returncode == 0, done.stderr
    return world


def docket_processes(ledger: Path) -> list[int]:
    """Live processes docket started for this ledger (agents, checks, hooks: they carry DOCKET_LEDGER)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get("DOCKET_LEDGER") == str(ledger) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_until(predicate, timeout: float = 30.0, step: float = 0.05,  # noqa: ANN001
               longest_step: float = 0.25) -> bool:
    """Whether predicate came true within timeout. The looks grow apart (from step to longest_step): many
    predicates start a docket process (about 150 ms of CPU each), and looking back to back for a minute would
    spend a core on looking."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(min(step, max(0.0, end - time.monotonic())))
        step = min(step * 1.5, max(step, longest_step))
    return predicate()


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)


def answer_the_question(world: GoWorld, go: subprocess.Popen, choice: int, *, hint: Callable[[], object] = lambda: "",
                        timeout: float = 180) -> tuple[dict, str, str]:
    """Wait for the one question `go` (a docket go) puts in the inbox, answer it with its choice, and let go finish:
    (the question as `docket inbox` listed it, go's stdout, its stderr). hint says what went wrong if none comes."""
    try:
        assert wait_until(lambda: world.json("inbox")["questions"], timeout=timeout), hint()
        (question,) = world.json("inbox")["questions"]
        answered = world.run("answer", question["question_id"], "--choice", str(choice))
        assert answered.returncode == 0, answered.stderr
        out, err = go.communicate(timeout=300)
    finally:
        if go.poll() is None:
            go.kill()
            go.communicate()
    return question, out, err


ASKED = {"question": "Which name should the greeter use?", "reason": "choice", "choices": ["ada", "bob"]}


def asking_script(command: str) -> dict:
    """A model server's script: on ASK-TASK the model calls docket's ask_human (ASKED), then runs command (its
    {result}: the tool's result), then says it wrote name.py."""
    return {"rules": [{"match": "ASK-TASK", "tool": {"name": "mcp__docket__ask_human", "input": ASKED},
                       "command": command, "text": "Wrote name.py."}],
            "default": {"text": "Nothing to do."}}


def assert_asked_answered_and_cited(world: GoWorld, summary: dict, keys: Path) -> None:
    """One question of r1.ask, answered "bob" (choice 2) and delivered to the agent; the receipt of the run (in
    summary, its `docket go --json`) verifies offline with keys and cites the question and the answer."""
    import base64

    (asked,), (answer,) = world.events("QuestionAsked"), world.events("QuestionAnswered")
    assert (asked["payload"]["worker_id"], asked["payload"]["generation"]) == ("r1.ask", 1)
    assert (answer["payload"]["answer"], answer["payload"]["choice"]) == ("bob", 2)
    assert len(world.events("AnswerDelivered")) == 1
    bundle = Path(summary["receipt"]["path"])
    verified = world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    envelope = json.loads(bundle.read_text().splitlines()[0])
    receipt = json.loads(base64.b64decode(envelope["payload"]))["predicate"]["receipt"]
    (request,) = receipt["requests"]
    assert (request["question"], request["answer"]["text"], request["delivered"]) == (ASKED["question"], "bob", True)
    assert {asked["position"], answer["position"]} <= set(receipt["cited"])


def agent_world(tmp_path: Path, name: str, script: str, tasks: str) -> tuple[GoWorld, Path]:
    """A world whose agent NAME is the Python script (run with the docket program as its argument, the prompt on
    stdin), and a signing key for its receipts (the key's path without .key or .pub)."""
    import textwrap

    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(script))
    config = f'[agents.{name}]\ncommand = ["{sys.executable}", "{agent}", "{{docket}}"]\nprompt = "stdin"\n'
    world = make_go_world(tmp_path, tasks=tasks, extra_config=config)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    return world, keys
