"""Hooks ([hooks] in docket.toml) with real processes, a real repository and a real ledger: each selector fires, the
command gets the event on stdin and DOCKET_* variables (no secret), a failing or hanging hook is recorded and never
raised, and each hook runs once per event: across SIGKILLs at every hook crash point, and with two processes firing
at once. ``fire_hooks`` is the use case `docket go` calls; here a small driver process calls it."""

from __future__ import annotations

import json
import socket
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ..conftest import Docket

# fire RUN AFTER: call fire_hooks once and print what it did; finish TASK RESULT: record TaskFinished
DRIVER = """
import json, sys
from docket.adapters.service_layer.kernel.effector import Effector
from docket.adapters.service_layer.use_cases.hooks import fire_hooks
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.runs import load_run
from docket.adapters.world.clock import SystemClock
from docket.adapters.world.files.config_file import find_config, load_config
from docket.domain import task
from pathlib import Path

repository = Path.cwd()
path = repository / ".git" / "docket" / "ledger.sqlite"
ledger, clock = Ledger(path), SystemClock()
if sys.argv[1] == "finish":
    def decision(now):
        found = ledger.get(task.apply, task.stream_of(sys.argv[2]))
        return task.finish(found, load_run(ledger, found.run_id), result=sys.argv[3], binding_id=None, code=None,
                           message=None, now=now)
    ledger.decide(decision, clock.now())
else:
    hooks = load_config(find_config(repository)).hooks
    fired = fire_hooks(ledger, clock, Effector(ledger, clock), hooks, sys.argv[2], docket_dir=path.parent,
                       ledger_path=path, repository=repository, after=int(sys.argv[3]))
    print(json.dumps({"examined": fired.examined,
                      "requested": [[r.hook, r.position, r.event_type] for r in fired.requested],
                      "outcomes": [o.model_dump() for o in fired.outcomes]}))
"""

# A hook writes only its TMPDIR and its table's write extras (never the repository): these write HOOK_OUT, a folder
# outside it that each hook's table lets it write (Hooks.config), named to it through env_allow.
APPEND = 'echo "$DOCKET_HOOK $DOCKET_POSITION" >> "$HOOK_OUT/ran.txt"'
SECRET = "sk-live0123456789abcdefghijABCDEFGHIJ"


class Hooks:
    """A repository with a ledger, an open run r1 and a planned task t1."""

    def __init__(self, docket: Docket):
        self.docket = docket
        docket("init")
        docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
        docket("task", "plan", "r1", "--title", "one", "--id", "t1")

    def config(self, **hooks: object) -> None:
        def toml(value: object) -> str:  # JSON strings and lists are TOML; a table is written inline
            if isinstance(value, dict):
                return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
            return json.dumps(value)

        self.out.mkdir(exist_ok=True)
        self.docket.env["HOOK_OUT"] = str(self.out)  # `docket replay --apply` runs a pending hook too
        tables = {name: {**({"command": value} if isinstance(value, list) else value),  # type: ignore[dict-item]
                         "env_allow": ["HOOK_OUT"], "write": [str(self.out)]} for name, value in hooks.items()}
        lines = ["[hooks]"] + [f"{json.dumps(name)} = {toml(value)}" for name, value in tables.items()]
        (self.docket.cwd / "docket.toml").write_text("\n".join(lines) + "\n")

    def driver(self, *args: str, fault: str | None = None, env: dict[str, str] | None = None,
               background: bool = False) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
        environment = {**self.docket.env, "HOOK_OUT": str(self.out), **(env or {})}
        if fault:
            environment["DOCKET_FAULT"] = fault
        command = [sys.executable, "-c", DRIVER, *args]
        if background:
            return subprocess.Popen(command, cwd=self.docket.cwd, env=environment, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        return subprocess.run(command, cwd=self.docket.cwd, env=environment, capture_output=True, text=True,
                              timeout=120)

    def fire(self, after: int = 0, **kwargs: object) -> dict:
        done = self.driver("fire", "r1", str(after), **kwargs)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def finish(self, task: str = "t1", result: str = "failed") -> None:
        done = self.driver("finish", task, result)
        assert done.returncode == 0, done.stderr

    def position_of(self, type_name: str) -> int:
        (event,) = self.docket("log", "--json", "--type", type_name).json()["events"]
        return event["position"]

    def finished(self) -> list[dict]:
        return [e["payload"] for e in self.docket("log", "--json", "--type", "HookFinished.v1").json()["events"]]

    @property
    def out(self) -> Path:
        return self.docket.cwd.parent / "hook-out"

    def ran(self) -> list[str]:
        path = self.out / "ran.txt"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def hooks(docket: Docket) -> Hooks:
    return Hooks(docket)


def test_a_task_finished_fires_its_hooks_once_with_the_event_on_stdin_and_docket_variables(hooks, docket):
    script = f'cat > "$HOOK_OUT/stdin.json"; env > "$HOOK_OUT/env.txt"; pwd > "$HOOK_OUT/cwd.txt"; {APPEND}'
    hooks.config(**{"task-finished": ["sh", "-c", script], "needs-attention": ["sh", "-c", APPEND],
                    "RunOpened": ["sh", "-c", APPEND]})
    hooks.finish("t1", "failed")
    position = hooks.position_of("TaskFinished.v1")
    fired = hooks.fire(env={"OPENAI_API_KEY": SECRET, "MY_TOKEN": "x", "DOCKET_FAULT_X": "1"})

    opened = hooks.position_of("RunOpened.v2")
    assert sorted(fired["requested"]) == sorted([["task-finished", position, "TaskFinished.v1"],
                                                 ["needs-attention", position, "TaskFinished.v1"],
                                                 ["RunOpened", opened, "RunOpened.v2"]])
    assert sorted(o["result"] for o in fired["outcomes"]) == ["succeeded"] * 3
    assert sorted(hooks.ran()) == sorted([f"task-finished {position}", f"needs-attention {position}",
                                          f"RunOpened {opened}"])
    stdin = json.loads((hooks.out / "stdin.json").read_text())
    assert stdin == {"position": position, "stream": "task:t1", "type": "TaskFinished.v1",
                     "recorded_at": stdin["recorded_at"],
                     "payload": {"task_id": "t1", "run_id": "r1", "result": "failed", "cycles": 0, "binding_id": None,
                                 "code": None, "message": None}}
    env = dict(line.split("=", 1) for line in (hooks.out / "env.txt").read_text().splitlines() if "=" in line)
    assert {k: v for k, v in env.items() if k.startswith("DOCKET_")} == {
        "DOCKET_RUN": "r1", "DOCKET_EVENT": "TaskFinished.v1", "DOCKET_POSITION": str(position),
        "DOCKET_HOOK": "task-finished", "DOCKET_TASK": "t1", "DOCKET_LEDGER": str(docket.ledger),
        "DOCKET_HOST": socket.gethostname()}
    assert SECRET not in (hooks.out / "env.txt").read_text() and "MY_TOKEN" not in env
    # its working directory is its own folder of the base's copies of the files it names, not the repository
    cwd = Path((hooks.out / "cwd.txt").read_text().strip())
    assert cwd.parent == (docket.cwd / ".git" / "docket" / "hooks").resolve() and cwd.name.endswith(".base")

    again = hooks.fire()  # from the start again: every (hook, position) was asked for already
    assert again["requested"] == [] and again["outcomes"] == []
    assert len(hooks.ran()) == 3 and len(hooks.finished()) == 3
    assert docket("verify").returncode == 0


def test_a_task_that_passed_does_not_need_attention_and_after_skips_what_was_examined(hooks):
    hooks.config(**{"needs-attention": ["sh", "-c", APPEND], "task-finished": ["sh", "-c", APPEND]})
    first = hooks.fire()
    assert first["requested"] == []
    hooks.finish("t1", "passed")
    second = hooks.fire(after=first["examined"])
    assert [r[0] for r in second["requested"]] == ["task-finished"]
    assert hooks.fire(after=second["examined"])["requested"] == []


def test_run_finished_fires_for_an_aborted_run(hooks, docket):
    hooks.config(**{"run-finished": ["sh", "-c", APPEND]})
    docket("run", "abort", "r1", "--reason", "enough")
    fired = hooks.fire()
    assert [r[2] for r in fired["requested"]] == ["RunAborted.v1"]
    assert hooks.ran() == [f"run-finished {hooks.position_of('RunAborted.v1')}"]


def test_a_failing_a_hanging_and_a_missing_hook_are_recorded_and_the_call_returns(hooks, docket):
    hooks.config(**{"task-finished": ["sh", "-c", "echo bad news; exit 1"],
                    "needs-attention": {"command": ["sh", "-c", "echo $$ > \"$HOOK_OUT/hang.pid\"; exec sleep 60"], "timeout": "1s"},
                    "TaskFinished.v1": ["no-such-program-docket-hooks"]})
    hooks.finish("t1", "failed")
    fired = hooks.fire()
    results = {o["hook"]: o for o in fired["outcomes"]}
    assert results["task-finished"]["result"] == "failed" and results["task-finished"]["exit_code"] == 1
    assert results["task-finished"]["tail"] == "bad news"
    assert results["needs-attention"]["result"] == "timed-out"
    assert results["needs-attention"]["signal"] == signal.SIGTERM
    assert results["TaskFinished.v1"]["result"] == "not-started"
    assert "no-such-program-docket-hooks" in results["TaskFinished.v1"]["message"]
    assert not psutil.pid_exists(int((hooks.out / "hang.pid").read_text()))
    assert docket("status", "r1", "--json").json()["pending_intents"] == []


def test_a_hook_does_not_fire_for_another_runs_events(hooks, docket):
    hooks.config(**{"task-finished": ["sh", "-c", APPEND]})
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r2")
    docket("task", "plan", "r2", "--title", "two", "--id", "t2")
    hooks.finish("t2", "failed")
    assert hooks.fire()["requested"] == []


def test_check_failed_fires_for_a_failed_check(docket):
    from .test_checks import Checks

    checks = Checks(docket)
    checks.checks(t={"command": ["sh", "-c", "exit 4"]})
    assert checks.run("t")[0] != 0
    hooks = Hooks.__new__(Hooks)
    hooks.docket = docket
    hooks.config(**{"check-failed": ["sh", "-c", APPEND]})
    fired = hooks.fire()
    assert [r[2] for r in fired["requested"]] == ["CheckFailed.v1"]
    assert [o["result"] for o in fired["outcomes"]] == ["succeeded"]


@pytest.mark.parametrize("text, message", [
    ('[hooks]\nfoo = ["x"]\n', "unknown hook event 'foo': name one of task-finished, check-failed, run-finished, "
                               "needs-attention"),
    ('[hooks]\ntask-finished = []\n', "hooks.task-finished.command"),
    ('[hooks]\ntask-finished = { command = ["x"], timeout = "0s" }\n', "'0s' must be longer than zero"),
    ('[hooks]\ntask-finished = { command = ["x"], timeout = "soon" }\n', "hooks.task-finished.timeout"),
    ('[hooks]\nHookFinished = ["x"]\n', "a hook cannot fire for hooks"),
    (f'[hooks]\ntask-finished = ["curl", "{SECRET}"]\n', "looks like a credential"),
])
def test_a_bad_hooks_table_is_a_clear_error(docket, text, message):
    (docket.cwd / "docket.toml").write_text(text)
    shown = docket("config", "show", check=False)
    assert shown.returncode == 2
    assert shown.stderr.startswith("docket: error: bad-config: ") and message in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1


HOOK_POINTS = [
    "hook:after-request",
    "hook:after-claim",
    "hook:after-start",
    "hook:after-exit",
    "effector:before-observe@HookRequested.v1",
    "effector:after-observe@HookRequested.v1",
    "effector:before-act@HookRequested.v1",
    "effector:after-act@HookRequested.v1",
    "effector:after-outcome@HookRequested.v1",
]


def _wait_for_line(hooks: Hooks) -> None:
    deadline = time.monotonic() + 30
    while not hooks.ran():
        assert time.monotonic() < deadline, "the started hook never ran"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("point", HOOK_POINTS)
def test_killed_at_a_crash_point_the_hook_runs_at_most_once_and_is_recorded_once(hooks, docket, point):
    hooks.config(**{"task-finished": ["sh", "-c", APPEND]})
    hooks.finish("t1", "failed")
    crashed = hooks.driver("fire", "r1", "0", fault=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    if point == "hook:after-start":
        _wait_for_line(hooks)  # its command was started before docket died: it runs on its own
    if point == "hook:after-request":
        assert docket("replay", "--apply").returncode == 0  # replay finishes a pending hook too
    else:
        hooks.fire()
    assert hooks.fire()["requested"] == []
    (finished,) = hooks.finished()
    if point == "hook:after-claim":
        assert finished["result"] == "interrupted" and "did not run" in finished["message"]
        assert hooks.ran() == []
    elif point == "hook:after-start":
        assert finished["result"] == "interrupted" and "may have run" in finished["message"]
        assert len(hooks.ran()) == 1
    else:
        assert finished["result"] == "succeeded"
        assert len(hooks.ran()) == 1
    assert docket("status", "r1", "--json").json()["pending_intents"] == []
    assert docket("verify").returncode == 0


@pytest.mark.slow
def test_two_processes_firing_at_once_run_each_hook_once(hooks, docket):
    hooks.config(**{"task-finished": ["sh", "-c", f"sleep 1; {APPEND}"]})
    hooks.finish("t1", "failed")
    racers = [hooks.driver("fire", "r1", "0", background=True) for _ in range(2)]
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
    deadline = time.monotonic() + 30
    while not hooks.finished():  # the one that lost the claim saw it running and left it to the other
        assert time.monotonic() < deadline
        hooks.fire()
        time.sleep(0.2)
    assert len(hooks.finished()) == 1 and hooks.finished()[0]["result"] == "succeeded"
    assert len(hooks.ran()) == 1
    requested = docket("log", "--json", "--type", "HookRequested.v1").json()["events"]
    assert len(requested) == 1
