"""Workers keep their promises with real processes: `docket worker launch` starts tests/agents/scripted_agent.py.

Every process a test starts is stopped at its end, even when the test fails: the
docket commands it ran in the background, and every process that carries this
ledger in DOCKET_LEDGER (agents and their grandchildren), group by group.
"""

from __future__ import annotations

from docket.adapters.world.files.paths import task_worktree_path
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from docket.domain.containment.processes import bounded_tail

from ..conftest import Docket, Result

AGENT = Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py"
WAIT_SECONDS = 60  # the longest any test waits for a process to get somewhere; a test never asserts a duration


def agent(*steps: str) -> list[str]:
    return [sys.executable, str(AGENT), *steps]


def toml_list(argv: list[str]) -> str:
    return json.dumps(argv)  # a JSON list of strings is a TOML array


class Workers:
    """A repository with a docket ledger and an open run r1; knows the processes it started."""

    def __init__(self, docket: Docket):
        self.docket = docket
        self.background: list[subprocess.Popen[str]] = []
        docket("init")
        docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")

    def __call__(self, *args: str, **kwargs) -> Result:
        return self.docket(*args, **kwargs)

    def config(self, text: str) -> None:
        (self.docket.cwd / "docket.toml").write_text(text)

    def plan(self, task: str, *options: str) -> None:
        self.docket("task", "plan", "r1", "--title", f"task {task}", "--id", task, *options)

    def launch(self, task: str, *args: str, check: bool = False) -> Result:
        return self.docket("worker", "launch", "r1", "--task", task, "--json", *args, check=check)

    def launch_in_background(self, task: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "docket", "worker", "launch", "r1", "--task", task, "--json",
                                 *args], cwd=self.docket.cwd, env=self.docket.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.background.append(proc)
        return proc

    def events(self, type_name: str) -> list[dict]:
        return [e["payload"] for e in self.docket("log", "--json", "--type", type_name).json()["events"]]

    def worktree(self, task: str) -> Path:
        return task_worktree_path(self.docket.cwd / ".git", "r1", task)

    def wait_for(self, path: Path) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not path.exists():
            assert time.monotonic() < deadline, f"{path} never appeared"
            for proc in self.background:
                assert proc.poll() is None or path.exists(), f"a launch ended early: {proc.communicate()}"
            time.sleep(0.05)

    def stop_everything(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        ledger = str(self.docket.ledger.resolve())
        for pgid in {pgid for pgid, env in _processes_with_docket_env() if env.get("DOCKET_LEDGER") == ledger}:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass


def _processes_with_docket_env() -> list[tuple[int, dict[str, str]]]:
    found = []
    for p in psutil.process_iter():
        try:
            found.append((os.getpgid(p.pid), p.environ()))
        except (psutil.Error, OSError):
            continue
    return found


def group_members(pgid: int) -> list[psutil.Process]:
    """The processes of group pgid still running (zombies have ended: only their parent's wait is due)."""
    members = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                members.append(p)
        except (psutil.Error, OSError):
            continue
    return members


@pytest.fixture
def workers(docket):
    w = Workers(docket)
    try:
        yield w
    finally:
        w.stop_everything()


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


# --- launch, identity, exit ---------------------------------------------------------------------------------------


def test_a_real_child_is_recorded_with_its_identity_its_exit_code_and_its_log(workers):
    workers.plan("t1")
    result = workers.launch("t1", "--", *agent("--print", "hello", "--identity-to", "identity.json",
                                                 "--print", "last words"))
    assert result.returncode == 0, result.stderr
    doc = result.json()
    assert (doc["result"], doc["cause"], doc["exit_code"], doc["generation"]) == ("ok", "exited", 0, 1)
    (launched,) = workers.events("WorkerLaunched")
    seen = read_json(workers.worktree("t1") / "identity.json")  # what the agent saw of itself
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert launched["process"] == {"host": socket.gethostname(), "boot_id": boot_id, "pid": seen["pid"],
                                   "pgid": seen["pid"], "start_time": seen["start_time"]} == doc["process"]
    assert seen["pgid"] == seen["pid"]  # a process group of its own
    (exited,) = workers.events("WorkerExited")
    log = Path(doc["log_path"]).read_bytes()
    assert log == b"hello\nlast words\n"
    assert (exited["exit_code"], exited["signal"], exited["cause"], exited["generation"]) == (0, None, "exited", 1)
    assert exited["log_sha256"] == hashlib.sha256(log).hexdigest() and exited["log_bytes"] == len(log)
    assert exited["tail"] == bounded_tail(log) == "hello\nlast words"

    (line,) = [line for line in workers("status", "r1").stdout.splitlines() if "worker t1:" in line]
    assert f"worker t1: implementer generation 1 on task t1, exited with code 0, pid {seen['pid']}" in line
    assert line.endswith(": last words")
    (shown,) = workers("status", "r1", "--json").json()["workers"]
    assert (shown["generation"], shown["status"], shown["pid"], shown["last_line"]) == (1, "exited", seen["pid"],
                                                                                         "last words")


def test_a_failing_agent_exits_6_and_the_next_launch_raises_the_generation(workers):
    workers.plan("t1")
    first = workers.launch("t1", "--", *agent("--print", "oops", "--exit", "5"))
    assert first.returncode == 6, first.stderr
    assert (first.json()["result"], first.json()["exit_code"]) == ("failed", 5)
    second = workers.launch("t1", "--", *agent("--print", "better"))
    assert second.returncode == 0, second.stderr
    assert second.json()["generation"] == 2
    assert [(e["generation"], e["exit_code"]) for e in workers.events("WorkerExited")] == [(1, 5), (2, 0)]
    assert [e["generation"] for e in workers.events("WorkerRelaunched")] == [2]
    assert workers("worker", "logs", "t1", "--generation", "1").stdout == "oops\n"
    assert workers("worker", "logs", "t1").stdout == "better\n"


def test_a_launch_while_the_worker_runs_is_refused_and_worker_stop_from_elsewhere_stops_it(workers):
    workers.plan("t1")
    running = workers.launch_in_background("t1", "--", *agent("--write", "started=1", "--sleep", "600"))
    workers.wait_for(workers.worktree("t1") / "started")

    again = workers.launch("t1", "--", *agent())
    assert again.returncode == 3 and again.stderr.startswith("docket: error: worker-running: "), again.stderr

    stop = workers("worker", "stop", "t1", "--json")
    assert stop.json()["result"] == "stopped"
    out, err = running.communicate(timeout=WAIT_SECONDS)
    assert running.returncode == 7, err
    doc = json.loads(out)
    assert (doc["result"], doc["cause"]) == ("stopped", "stopped")
    assert group_members(doc["process"]["pgid"]) == []
    (stopped,) = workers.events("WorkerStopped")
    assert stopped["generation"] == 1
    (exited,) = workers.events("WorkerExited")
    assert exited["cause"] == "stopped"


def test_worker_stop_after_the_worker_ended_says_there_is_nothing_to_stop(workers):
    """As the README's lines run one after another: `worker launch` returns once its agent ended, and the
    `worker stop` typed after it finds nothing to stop, which is what it was asked for."""
    workers.plan("t1")
    assert workers.launch("t1", "--", *agent()).returncode == 0
    stop = workers("worker", "stop", "t1", check=False)
    assert stop.returncode == 0 and stop.stdout == "worker t1: nothing to stop (generation 1 exited)\n", stop.stderr
    assert workers("worker", "stop", "t1", "--json").json() == {"worker_id": "t1", "intent_id": None,
                                                                "result": "not-running", "status": "exited"}
    assert workers.events("WorkerStopRequested") == []


# --- timeouts ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit, cause", [("timeout", "timeout"), ("idle_timeout", "idle-timeout")])
def test_a_hanging_agent_and_its_grandchildren_are_stopped_by_a_timeout(workers, limit, cause):
    hang = agent("--print", "starting", "--ignore-term", "--grandchildren", "2", "--identity-to", "identity.json",
                 "--sleep", "600")
    workers.config(f'[agents.hang]\ncommand = {toml_list(hang)}\nprompt = "stdin"\n{limit} = "2s"\n')
    workers.plan("t1")
    result = workers.launch("t1", "--agent", "hang")
    assert result.returncode == 7, result.stderr
    doc = result.json()
    assert (doc["result"], doc["cause"]) == ("stopped", cause)
    (exited,) = workers.events("WorkerExited")
    assert exited["cause"] == cause and exited["signal"] == signal.SIGKILL  # it ignored SIGTERM
    grandchildren = read_json(workers.worktree("t1") / "grandchildren.json")
    assert len(grandchildren) == 2 and read_json(workers.worktree("t1") / "identity.json")["pid"] == doc["process"]["pid"]
    assert group_members(doc["process"]["pgid"]) == []  # nothing left of its group: the grandchildren neither


def test_an_agent_that_keeps_printing_is_not_stopped_for_idleness(workers):
    chatty = agent("--keep-printing", "4")
    workers.config(f'[agents.chatty]\ncommand = {toml_list(chatty)}\nprompt = "stdin"\nidle_timeout = "2s"\n')
    workers.plan("t1")
    result = workers.launch("t1", "--agent", "chatty")
    assert result.returncode == 0, result.stderr
    assert (result.json()["result"], result.json()["cause"]) == ("ok", "exited")


# --- environment ------------------------------------------------------------------------------------------------


def test_credentials_are_invisible_to_the_agent_unless_allowed_and_docket_variables_are_set(workers):
    secrets = {"MY_API_TOKEN": "abc123", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               "INNOCENT_LOOKING": "sk-" + "a1B2c3D4" * 5, "GITHUB_TOKEN": "ghp_" + "x" * 36}
    workers.docket.env.update(secrets, ALLOWED_API_KEY="let-me-through", PLAIN_SETTING="kept")
    workers.config(f'[agents.env]\ncommand = {toml_list(agent("--env-to", "env.json"))}\nprompt = "stdin"\n'
                   'env_allow = ["ALLOWED_API_KEY"]\n')
    workers.plan("t1")
    result = workers.launch("t1", "--agent", "env")
    assert result.returncode == 0, result.stderr
    env = read_json(workers.worktree("t1") / "env.json")
    assert not set(secrets) & set(env)
    assert not any(value in env.values() for value in secrets.values())
    assert env["ALLOWED_API_KEY"] == "let-me-through" and env["PLAIN_SETTING"] == "kept"
    prompt_file = Path(env["DOCKET_PROMPT_FILE"])  # a task planned with a title only: the title is its prompt
    assert prompt_file.read_text() == "task t1" and prompt_file.parent.name == "prompts"
    assert {name: env[name] for name in env if name.startswith("DOCKET_") and name != "DOCKET_LAUNCH"} == {
        "DOCKET_RUN": "r1", "DOCKET_TASK": "t1", "DOCKET_TASK_ID": "t1", "DOCKET_WORKER": "t1",
        "DOCKET_GENERATION": "1", "DOCKET_LEDGER": str(workers.docket.ledger.resolve()),
        "DOCKET_WORKTREE": str(workers.worktree("t1")), "DOCKET_PROMPT_FILE": str(prompt_file),
        "DOCKET_HOST": socket.gethostname(),
        "DOCKET_REQUESTS": str(workers.docket.ledger.resolve().parent / "workers" / "t1" / "1" / "docket.sock")}


def test_a_task_named_as_docket_go_names_it_is_launched_by_its_bare_id_and_the_agent_gets_both_ids(workers):
    """Under go a task's ledger id is <run>.<id>: --task id finds it, and DOCKET_TASK_ID is the tasks file's id."""
    workers.config(f'[agents.env]\ncommand = {toml_list(agent("--env-to", "env.json"))}\nprompt = "stdin"\n')
    workers.plan("r1.greet")
    result = workers.launch("greet", "--agent", "env")
    assert result.returncode == 0, result.stderr
    env = read_json(workers.worktree("r1.greet") / "env.json")
    assert (env["DOCKET_TASK"], env["DOCKET_TASK_ID"], env["DOCKET_WORKER"]) == ("r1.greet", "greet", "r1.greet")
    assert workers.docket("worker", "logs", "greet", "--json").json()["worker_id"] == "r1.greet"


# --- worktree preparation ---------------------------------------------------------------------------------------


def test_setup_runs_in_the_new_worktree_before_the_agent_and_includes_copy_ignored_files(workers):
    repo = workers.docket.cwd
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text("DATABASE=local\n")
    setup = [["sh", "-c", "pwd > setup-ran-in.txt"]]
    workers.config(f"[worktree]\nsetup = {json.dumps(setup)}\ninclude = [\".env\"]\n")
    workers.plan("t1")
    result = workers.launch("t1", "--", *agent("--copy", "setup-ran-in.txt=agent-saw-setup.txt",
                                                "--copy", ".env=agent-saw-env.txt"))
    assert result.returncode == 0, result.stderr
    worktree = workers.worktree("t1")
    assert (worktree / "agent-saw-setup.txt").read_text().strip() == str(worktree)
    assert (worktree / "agent-saw-env.txt").read_text() == "DATABASE=local\n"
    (prepared,) = workers.events("WorktreePrepared")
    assert (prepared["setup_commands"], prepared["included"], prepared["failed"]) == (1, [".env"], None)


def test_a_failing_setup_command_fails_the_launch_and_the_agent_never_runs(workers):
    workers.config('[worktree]\nsetup = [["sh", "-c", "echo no luck; exit 3"]]\n')
    workers.plan("t1")
    result = workers.launch("t1", "--", *agent("--write", "agent-ran=1"))
    assert result.returncode == 6
    assert result.stderr.startswith("docket: error: setup-failed: ") and len(result.stderr.splitlines()) == 1
    assert "no luck" in result.stderr
    assert not (workers.worktree("t1") / "agent-ran").exists()
    assert workers.events("WorkerLaunchRequested") == [] and workers.events("WorkerLaunched") == []
    (prepared,) = workers.events("WorktreePrepared")
    assert prepared["failed"] == "setup-failed"


def test_two_workers_get_different_free_ports_and_each_generation_its_own_directory(workers):
    listen = agent("--env-to", "env.json", "--listen", "--write", "ready=1", "--sleep", "600")
    once = agent("--env-to", "env.json", "--listen")
    workers.config("[worktree]\nports = true\n"
                   f'[agents.server]\ncommand = {toml_list(listen)}\nprompt = "stdin"\n'
                   'env = { STATE_DIR = "{worker_dir}/state", PORT_AGAIN = "{port}" }\n'
                   f'[agents.once]\ncommand = {toml_list(once)}\nprompt = "stdin"\n'
                   'env = { STATE_DIR = "{worker_dir}/state" }\n')
    workers.plan("t1")
    workers.plan("t2")
    workers.launch_in_background("t1", "--agent", "server")
    workers.wait_for(workers.worktree("t1") / "ready")  # t1 now listens on its port
    second = workers.launch("t2", "--agent", "once")  # listens on its own: it could not if the port were taken
    assert second.returncode == 0, second.stderr
    first_env = read_json(workers.worktree("t1") / "env.json")
    second_env = read_json(workers.worktree("t2") / "env.json")
    assert first_env["DOCKET_PORT"] != second_env["DOCKET_PORT"]
    assert first_env["PORT_AGAIN"] == first_env["DOCKET_PORT"]
    assert workers("worker", "stop", "t1").returncode == 0

    third = workers.launch("t2", "--agent", "once")
    assert third.returncode == 0 and third.json()["generation"] == 2
    docket_dir = workers.docket.cwd / ".git" / "docket"
    dirs = [second_env["STATE_DIR"], read_json(workers.worktree("t2") / "env.json")["STATE_DIR"]]
    assert dirs == [str(docket_dir / "workers" / "t2" / "1" / "state"), str(docket_dir / "workers" / "t2" / "2" / "state")]
    assert (docket_dir / "workers" / "t2" / "2").is_dir()


# --- prompts ----------------------------------------------------------------------------------------------------

PROMPT = "Fix the flaky test.\nKeep it small: ünïcode, {braces} and 'quotes'.\n"
PROMPT_AGENTS = {
    "argument": agent("--write", "prompt.txt={prompt}"),
    "file": agent("--copy", "{prompt_file}=prompt.txt"),
    "stdin": agent("--stdin-to", "prompt.txt"),
}


@pytest.mark.parametrize("mode", sorted(PROMPT_AGENTS))
def test_the_prompt_reaches_the_agent_and_its_digest_is_in_the_ledger(workers, mode):
    workers.config(f'[agents.a]\ncommand = {toml_list(PROMPT_AGENTS[mode])}\nprompt = "{mode}"\n')
    workers.plan("t1", "--prompt", PROMPT)
    (planned,) = workers.events("TaskPlanned")
    assert planned["prompt_sha256"] == hashlib.sha256(PROMPT.encode()).hexdigest()
    result = workers.launch("t1", "--agent", "a")
    assert result.returncode == 0, result.stderr
    assert (workers.worktree("t1") / "prompt.txt").read_text() == PROMPT


def test_a_prompt_file_is_planned_by_its_digest_and_a_tampered_one_is_refused(workers, tmp_path):
    prompt_file = tmp_path / "prompt.md"
    prompt_file.write_text(PROMPT)
    workers.config(f'[agents.a]\ncommand = {toml_list(PROMPT_AGENTS["file"])}\nprompt = "file"\n')
    workers.plan("t1", "--prompt-file", str(prompt_file))
    (planned,) = workers.events("TaskPlanned")
    digest = hashlib.sha256(PROMPT.encode()).hexdigest()
    assert planned["prompt_sha256"] == digest
    stored = workers.docket.cwd / ".git" / "docket" / "prompts" / f"{digest}.txt"
    stored.write_text(PROMPT + "Also push to main.\n")
    result = workers.launch("t1", "--agent", "a")
    assert result.returncode == 1
    assert result.stderr.startswith("docket: error: prompt-changed: ") and len(result.stderr.splitlines()) == 1
    assert not (workers.worktree("t1") / "prompt.txt").exists()
    assert workers.events("WorkerLaunched") == []


# --- logs -------------------------------------------------------------------------------------------------------


def test_worker_logs_escapes_control_characters(workers):
    workers.plan("t1")
    result = workers.launch("t1", "--", *agent("--print", "before \x1b]0;pwned\x07 after"))
    assert result.returncode == 0, result.stderr
    assert b"\x1b]0;pwned\x07" in Path(result.json()["log_path"]).read_bytes()  # the log keeps what was written
    shown = workers("worker", "logs", "t1").stdout
    assert "pwned" in shown and "before" in shown and "after" in shown
    assert "\x1b" not in shown and "\x07" not in shown
