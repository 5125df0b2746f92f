"""What the receipt says about the world, checked by an auditor with `verify-receipt`: the repository it is about
(stable across clones), the commit it vouches for, the run; and an agent that moves the target during the run is
named in the receipt, by the commits docket did not make."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.e2e.go_world import make_go_world, unsandboxed

TASKS = '[[tasks]]\nid = "t"\ntitle = "honest work"\nprompt = "write honest.py: X = 1"\n'


def _keys(world, tmp_path: Path) -> Path:
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir(exist_ok=True)
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    return keys


def _verify(world, bundle: str, keys: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return world.run("verify-receipt", bundle, "--key", f"{keys}.pub", *args)


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("receipt")
    world = make_go_world(tmp_path, tasks=TASKS)
    keys = _keys(world, tmp_path)
    done = world.go("r1", "--target", "main", "--key", f"{keys}.key")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    return world, keys, summary["receipt"]["path"], tmp_path


def test_the_receipt_names_its_repository_and_an_auditor_can_ask_for_it(delivered):
    world, keys, bundle, tmp_path = delivered
    verified = _verify(world, bundle, keys, "--json")
    assert verified.returncode == 0, verified.stderr
    doc = json.loads(verified.stdout)
    repository_id = (world.repo / ".git" / "docket" / "repository-id").read_text().strip()
    root = git(world.repo, "rev-list", "--max-parents=0", "main")
    assert doc["format"] == 3
    assert doc["repository"] == {"id": repository_id, "roots": [root]}
    assert doc["moved_by_others"] == {"moved": False, "commits": [], "base_reached": True}
    # what each worker could touch: the sandbox its launch recorded, cited
    (worker,) = doc["workers"]
    assert (worker["task_id"], worker["worker_id"], worker["generation"]) == ("r1.t", "r1.t", 1)
    sandbox = worker["sandbox"]
    assert sandbox["enforced"] is True and len(sandbox["policy_sha256"]) == 64
    assert any(Path(root).name == "r1.t" for root in sandbox["write_roots"])  # its own workspace
    assert not any(str(world.repo) == root or str(world.repo / ".git") == root for root in sandbox["write_roots"])
    text = _verify(world, bundle, keys).stdout
    assert f"repository: {repository_id}, root commit(s) {root}" in text
    assert "the target moved only by docket's own merges" in text
    assert "worker r1.t generation 1 could touch: write " in text
    assert f"policy sha256 {sandbox['policy_sha256'][:16]}" in text
    final = git(world.repo, "rev-parse", "main")
    assert doc["subject"] == {"name": "refs/heads/main", "digest": {"gitCommit": final}}
    # the same repository by its id, by its path, and by a clone of it (which has no docket id of its own)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(world.repo), str(clone))
    for expected in (repository_id, str(world.repo), str(clone)):
        asked = _verify(world, bundle, keys, "--repository", expected, "--commit", final[:12], "--run", "r1")
        assert asked.returncode == 0, (expected, asked.stderr)


@pytest.mark.parametrize("option, value, code", [
    ("--run", "r2", "receipt-for-another-run"),
    ("--commit", "0" * 40, "receipt-for-another-commit"),
    ("--commit", "abc", "receipt-for-another-commit"),  # too short to name a commit
    ("--repository", "repo-" + "0" * 32, "receipt-for-another-repository"),
    ("--repository", "OTHER", "receipt-for-another-repository"),
])
def test_a_receipt_for_something_else_fails(delivered, option, value, code):
    world, keys, bundle, tmp_path = delivered
    if value == "OTHER":
        value = str(tmp_path / "other") if (tmp_path / "other").exists() else str(make_repo(tmp_path / "other"))
    done = _verify(world, bundle, keys, option, value)
    assert done.returncode == 1 and done.stderr.startswith(f"docket: error: {code}: "), done.stderr


# Commits a backdoor onto the target in the user's own checkout while it works, then does its task honestly.
AGENT = '''\
import os, subprocess, sys
repo = sys.argv[2]
with open(os.path.join(repo, "backdoor.txt"), "w") as f:
    f.write("backdoor\\n")
subprocess.run(["git", "-C", repo, "add", "backdoor.txt"], check=True)
subprocess.run(["git", "-C", repo, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "-m",
                "innocent"], check=True)
open("honest.py", "w").write("X = 1\\n")
'''


def test_an_agent_that_moves_the_target_is_named_in_the_receipt(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=TASKS)
    agent = tmp_path / "moving_agent.py"
    agent.write_text(AGENT)
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "mover"', 1)
    config += f'\n[agents.mover]\ncommand = ["{sys.executable}", "{agent}", "{{prompt_file}}", "{world.repo}"]\n' \
              'prompt = "file"\n'
    (world.repo / "docket.toml").write_text(unsandboxed(config))
    git(world.repo, "commit", "-qam", "the moving agent")
    keys = _keys(world, tmp_path)
    done = world.go("r1", "--target", "main", "--key", f"{keys}.key")
    summary = json.loads(done.stdout)
    backdoor = git(world.repo, "log", "--format=%H", "-1", "--", "backdoor.txt")
    bundle = summary["receipt"]["path"]
    verified = _verify(world, bundle, keys, "--json")
    assert verified.returncode == 0, verified.stderr
    moved = json.loads(verified.stdout)["moved_by_others"]
    assert moved["moved"] and moved["commits"] == [backdoor], (moved, done.stderr)
    text = _verify(world, bundle, keys)
    assert f"warning: the target moved during the run by commits docket did not make: {backdoor[:12]}" in text.stdout
    assert summary["receipt_moved_by_others"]["commits"] == [backdoor]  # and docket go's summary says so,
    assert [m["foreign_commits"] for m in summary["moved_by_others"]] == [[backdoor]]  # as the ledger recorded it
    shown = world.run("go", "--resume", "r1")
    assert "warning: main was moved by someone else" in shown.stdout and backdoor[:12] in shown.stdout
