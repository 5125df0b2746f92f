"""The real aider (0.86.2, installed by tests/agents/real_clis.py), end to end through `docket go`, offline.

aider runs as docs/agents.md configures it (its `agent: aider` block merged with its `agent-offline: aider` block,
read from the page) against the scripted model server of examples/, which answers each task's prompt with one whole
file: two tasks pinned, checked by a real check, integrated, sealed, and the receipt verified offline with the public
key alone. The credentials: only the allow-listed fake key reaches aider and the server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import psutil
import pytest

from examples.model_server import ModelServer
from tests.agents.aider_world import (FAKE_KEY, FILES, aider_environment, git, script, write_repository)
from tests.e2e.go_world import GoWorld, docket_processes

pytestmark = pytest.mark.slow

# Credentials in docket's environment that the aider block does not allow: they must reach neither aider nor the server.
LEAKS = {"AWS_SECRET_ACCESS_KEY": "leak-aws-secret", "GH_TOKEN": "ghp_leak0123456789abcdefghijklmnop",
         "MY_SERVICE_PASSWORD": "leak-password", "OPENAI_ORG_KEY": "leak-openai-org"}
# The block allows ANTHROPIC_API_KEY too (for a Claude --model): it reaches aider, but an OpenAI model never sends it.
UNUSED = {"ANTHROPIC_API_KEY": "sk-ant-unused-0123456789abcdefghijkl"}


def aider_world(tmp_path: Path, server: ModelServer, aider: Path, *, commits: bool = False) -> GoWorld:
    repo = write_repository(tmp_path / "repo", server.url, aider, commits=commits)
    world = GoWorld(repo, aider_environment(**LEAKS, **UNUSED))
    done = world.run("init")
    assert done.returncode == 0, done.stderr
    return world


def expected_tree(repo: Path, base: str, files: dict[str, str]) -> str:
    """The tree of base with files added: what a candidate of that task must hold, nothing more."""
    index = repo / ".git" / "expected-index"
    env = {"GIT_INDEX_FILE": str(index)}
    run = lambda *args, stdin=None: subprocess.run(["git", *args], cwd=repo, env={**os.environ, **env},  # noqa: E731
                                                   input=stdin, check=True, capture_output=True, text=True).stdout.strip()
    run("read-tree", base)
    for path, content in files.items():
        blob = run("hash-object", "-w", "--stdin", stdin=content)
        run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    tree = run("write-tree")
    index.unlink()
    return tree


class AgentEnvironments:
    """The environments of the aider processes docket starts for a ledger, read from /proc while they run."""

    def __init__(self, ledger: Path) -> None:
        self.ledger, self.seen, self._stop = ledger, {}, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> AgentEnvironments:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            for pid in docket_processes(self.ledger):
                try:
                    process = psutil.Process(pid)
                    if "aider" in " ".join(process.cmdline()):
                        self.seen.setdefault(pid, process.environ())
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue


def candidates(world: GoWorld) -> dict[str, dict[str, dict]]:
    """CandidatePinned of each task's generation, by run and task (its first pin: integrating pins more, on top of
    the merge queue)."""
    pinned: dict[str, dict[str, dict]] = {}
    for event in world.events("CandidatePinned"):
        run_id, task = event["payload"]["task_id"].split(".", 1)
        pinned.setdefault(run_id, {}).setdefault(task, event["payload"])
    return pinned


def verify_offline(world: GoWorld, tmp_path: Path, bundle: Path, public_key: Path) -> dict:
    """docket verify-receipt in a folder holding only the bundle and the public key: no ledger, no repository."""
    offline = tmp_path / "offline"
    offline.mkdir()
    shutil.copy(bundle, offline / bundle.name)
    shutil.copy(public_key, offline / public_key.name)
    done = subprocess.run(world.argv("verify-receipt", bundle.name, "--key", public_key.name, "--json"), cwd=offline,
                          env=world.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def key_pair(world: GoWorld, tmp_path: Path) -> tuple[Path, Path]:
    prefix = tmp_path / "keys" / "docket"
    prefix.parent.mkdir()
    assert world.run("key", "generate", "--out", str(prefix)).returncode == 0
    return Path(f"{prefix}.key"), Path(f"{prefix}.pub")


def test_two_tasks_by_the_real_aider_are_pinned_checked_integrated_sealed_and_verified_offline(tmp_path, aider_cli):
    with ModelServer(script()) as server:
        world = aider_world(tmp_path, server, aider_cli)
        private_key, public_key = key_pair(world, tmp_path)
        base = git(world.repo, "rev-parse", "main")
        with AgentEnvironments(world.ledger) as agents:
            done = world.go("r1", "--target", "main", "--parallel", "2", "--key", str(private_key))
        assert done.returncode == 0, done.stderr
        requests = server.requests

    summary = json.loads(done.stdout)
    rows = {row["task"]: row for row in summary["tasks"]}
    assert summary["outcome"] == "delivered"
    assert {task: (row["result"], row["cycles"], row["checks"]) for task, row in rows.items()} == {
        "greet": ("delivered", 1, {"words": "passed"}), "farewell": ("delivered", 1, {"words": "passed"})}
    # what aider changed: exactly its file, whole, in each candidate (no .aider* cache, no history: ignored or in
    # the worker's folder); aider committed nothing, so each candidate commit sits on the run's base
    pinned = candidates(world)["r1"]
    for task, files in FILES.items():
        candidate = pinned[task]
        assert candidate["changed_paths"] == list(files)
        assert candidate["parent"] == base
        assert candidate["tree"] == expected_tree(world.repo, base, files)
        assert git(world.repo, "rev-parse", f"{candidate['commit']}^{{tree}}") == candidate["tree"]
        for path, content in files.items():
            assert git(world.repo, "show", f"{candidate['commit']}:{path}") + "\n" == content
    # the real check ran on each candidate and passed; the target holds both files and the check passes there too
    passed = world.events("CheckPassed")
    assert sorted(e["payload"]["check"] for e in passed) == ["words"] * len(passed) and len(passed) >= 2
    assert git(world.repo, "rev-parse", "main") == summary["target_commit"]
    assert git(world.repo, "ls-tree", "--name-only", "main").split() == sorted(
        [".aider.model.metadata.json", ".gitignore", "README.md", "check.py", "docket.toml", "farewell.py",
         "greet.py"])
    assert subprocess.run([shutil.which("python3"), "check.py"], cwd=world.repo, capture_output=True,
                          text=True).stdout == "greet: ok\nfarewell: ok\n"
    # sealed, exported, verified with the public key alone
    verified = verify_offline(world, tmp_path, Path(summary["receipt"]["path"]), public_key)
    assert verified["ok"] is True, verified
    assert world.run("verify").returncode == 0
    # the agent's exit and what it reported: exit 0, aider's token line read from its log
    exits = world.events("WorkerExited")
    assert [(e["payload"]["cause"], e["payload"]["exit_code"]) for e in exits] == [("exited", 0)] * 2
    assert all("Applied edit to" in e["payload"]["tail"] for e in exits)
    reports = world.events("AgentReported")
    assert len(reports) == 2 and all(r["payload"]["format"] == "aider" and r["payload"]["input_tokens"] > 0
                                     and r["payload"]["output_tokens"] > 0 for r in reports)
    # secrets: one chat completion per task, each with the fake key, and no other secret anywhere in a request
    assert [(r["api"], r["reply"], r["api_key"]) for r in requests] == [("chat", "files", FAKE_KEY)] * 2
    sent = json.dumps(requests)
    assert not [name for name, value in {**LEAKS, **UNUSED}.items() if value in sent]
    # ... nor in aider's environment (read from /proc while it ran), nor in its logs
    assert {environ["DOCKET_WORKER"] for environ in agents.seen.values()} == {"r1.greet", "r1.farewell"}
    for environ in agents.seen.values():  # aider and the processes it started
        assert environ["OPENAI_API_KEY"] == FAKE_KEY
        assert not set(LEAKS) & set(environ) and not [v for v in LEAKS.values() if v in json.dumps(environ)]
        assert environ["ANTHROPIC_API_KEY"] == UNUSED["ANTHROPIC_API_KEY"]  # allowed by the block, as it says
        assert environ["HOME"].startswith(str(world.repo / ".git" / "docket" / "workers"))
    homes = {environ["DOCKET_WORKER"]: environ["HOME"] for environ in agents.seen.values()}
    assert len(set(homes.values())) == 2  # a config home per worker
    logs = "".join(path.read_text(errors="replace") for path in (world.repo / ".git" / "docket" / "logs").rglob("*.log"))
    assert "Applied edit to greet.py" in logs and not [v for v in [*LEAKS.values(), *UNUSED.values(), FAKE_KEY]
                                                       if v in logs]
    assert docket_processes(world.ledger) == []


def test_aider_that_commits_and_aider_that_does_not_pin_the_same_trees_and_docket_attributes_each_commit(
        tmp_path, aider_cli):
    with ModelServer(script()) as server:
        world = aider_world(tmp_path, server, aider_cli, commits=True)
        base = git(world.repo, "rev-parse", "main")
        git(world.repo, "branch", "committed")
        plain = world.go("r1", "--target", "main", "--parallel", "2")
        committed = world.go("r2", "--target", "committed", "--parallel", "2", "--agent", "aider-commits")
        assert plain.returncode == 0, plain.stderr
        assert committed.returncode == 0, committed.stderr
        commit_messages = [r for r in server.requests if r["reply"] == "commit message"]

    by_run = candidates(world)
    assert len(commit_messages) == 2  # aider asked the model for a message for each of its commits (r2 only)
    for task, files in FILES.items():
        uncommitted, own_commit = by_run["r1"][task], by_run["r2"][task]
        # the same tree either way: HEAD plus anything uncommitted
        assert uncommitted["tree"] == own_commit["tree"] == expected_tree(world.repo, base, files)
        # without aider's commits, the candidate commit sits on the base; with them, on aider's commit
        assert uncommitted["parent"] == base
        aider_commit = own_commit["parent"]
        assert aider_commit != base and git(world.repo, "rev-parse", f"{aider_commit}^") == base
        assert git(world.repo, "rev-parse", f"{aider_commit}^{{tree}}") == own_commit["tree"]
        # aider's commit: its author (the identity the block gives git), its co-author trailer, no Docket-* trailer
        author, message = git(world.repo, "show", "-s", "--format=%an <%ae>%n%B", aider_commit).split("\n", 1)
        assert author == "aider <aider@localhost>"
        assert "Co-authored-by: aider (openai/scripted)" in message and "Docket-" not in message
        # docket's candidate commit carries docket's trailers, naming this run, task and generation
        trailers = git(world.repo, "show", "-s", "--format=%(trailers:only,unfold)", own_commit["commit"])
        assert f"Docket-Run: r2\nDocket-Task: r2.{task}\nDocket-Worker: r2.{task}\nDocket-Generation: 1\n" \
               f"Docket-Binding: {own_commit['binding_id']}" in trailers
        # and the integration's merge of it names it in its trailers: docket's attribution, on docket's commits
        merge = git(world.repo, "log", "--format=%H", "--merges", "--grep", f"Docket-Task: r2.{task}$", "committed")
        assert git(world.repo, "rev-parse", f"{merge}^2") == own_commit["commit"]
        assert f"Docket-Candidate: {own_commit['binding_id']}" in git(world.repo, "show", "-s", "--format=%B", merge)
    # both runs delivered the same files
    for path, content in {**FILES["greet"], **FILES["farewell"]}.items():
        assert world.file_at("main", path) == world.file_at("committed", path) == content


def test_aider_refused_by_the_server_changes_nothing_and_the_task_is_retried_within_its_cycles(tmp_path, aider_cli):
    # aider gives up on a 401 at once, prints the error and exits 0 (it exits 0 on any API error): docket records
    # the exit, finds nothing changed and gives the task its next cycle, whose prompt says why
    with ModelServer(script(first_attempt={"status": 401})) as server:
        world = aider_world(tmp_path, server, aider_cli)
        done = world.go("r1", "--target", "main", "--parallel", "2", "--cycles", "2")
        requests = server.requests
    assert done.returncode == 0, done.stderr
    rows = {row["task"]: row for row in json.loads(done.stdout)["tasks"]}
    assert {task: (row["result"], row["cycles"]) for task, row in rows.items()} == {
        "greet": ("delivered", 2), "farewell": ("delivered", 2)}
    exits = sorted((e["payload"]["worker_id"], e["payload"]["generation"], e["payload"]["exit_code"],
                    "AuthenticationError" in e["payload"]["tail"]) for e in world.events("WorkerExited"))
    assert exits == [("r1.farewell", 1, 0, True), ("r1.farewell", 2, 0, False), ("r1.greet", 1, 0, True),
                     ("r1.greet", 2, 0, False)]
    feedback = sorted((e["payload"]["task_id"], e["payload"]["generation"], e["payload"]["code"])
                      for e in world.events("TaskFeedbackRecorded"))
    assert feedback == [("r1.farewell", 1, "no-changes"), ("r1.greet", 1, "no-changes")]
    assert sorted(r["reply"] for r in requests) == ["error", "error", "files", "files"]
    assert all(r["api_key"] == FAKE_KEY for r in requests)
    retried = [r for r in requests if r["reply"] == "files"]
    assert all("the agent changed nothing" in json.dumps(r["body"]) for r in retried)
    for task, files in FILES.items():
        for path, content in files.items():
            assert world.file_at("main", path) == content


def test_aider_without_a_git_identity_writes_its_own_workspaces_config_never_the_users(tmp_path, aider_cli):
    # Without the block's git identity aider writes one into the repository's config. In a linked worktree that was
    # the user's shared .git/config, and a lock another writer left there made it crash (exit 1, a traceback: what
    # two aiders starting at once did before the block gave git an identity). A workspace is a repository of its
    # own: aider writes the identity into the workspace's config, the user's config and its lock are untouched, and
    # the work is delivered
    with ModelServer(script()) as server:
        world = aider_world(tmp_path, server, aider_cli)
        config = world.repo / "docket.toml"
        config.write_text(re.sub(r', "GIT_CONFIG_[A-Z0-9_]+" = "[^"]*"', "", config.read_text()))
        assert "GIT_CONFIG_" not in config.read_text() and '"HOME"' in config.read_text()
        git(world.repo, "commit", "-q", "-am", "aider without a git identity")
        users_config = (world.repo / ".git" / "config").read_bytes()
        (world.repo / ".git" / "config.lock").write_text("")
        done = world.run("go", "--goal", "greet", "--task", "Write greet.py with a function greet(name).", "--id",
                         "r1", "--target", "main", "--cycles", "2", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["tasks"]
    assert row["result"] == "delivered"
    assert (world.repo / ".git" / "config").read_bytes() == users_config
    assert (world.repo / ".git" / "config.lock").read_text() == ""  # another writer's lock: left alone
    assert "greet.py" in git(world.repo, "ls-tree", "--name-only", "main")
