"""Attack: an agent plants git configuration, hooks and filters in its workspace and commits.

In a linked worktree the agent's ``.git/config`` was the user's shared one: ``filter.*.smudge``,
``core.fsmonitor``, ``core.hooksPath`` and hooks planted there ran inside ``docket go`` (a check execution's
checkout, a ``read-tree``) and in the user's own next ``git status``. A workspace of its own keeps all of it inside
the workspace: the user's ``.git/config`` and hooks are byte for byte what they were, nothing planted runs in
anything docket does (a marker file every planted command would write never appears), and the honest task of the
same run is delivered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import AGENT, make_go_world, unsandboxed, wait_until

TASKS = '''\
[[tasks]]
id = "evil"
title = "plant git configuration"
prompt = """Plant it.
write evil.py: EVIL = 1
commit: evil work
PLANT
"""

[[tasks]]
id = "honest"
title = "honest work"
prompt = """Do the work.
write honest.py: HONEST = 1
"""
'''

HOSTILE = '''\
"""An agent that does its scripted work, then plants git configuration, hooks and filters in its workspace."""
import os, pathlib, subprocess, sys

marker = sys.argv[1]
prompt_file = sys.argv[2]
done = subprocess.run([sys.executable, sys.argv[3], "--prompt-file", prompt_file])
if "PLANT" in pathlib.Path(prompt_file).read_text():
    ran = f"echo ran >> {marker}"
    hooks = pathlib.Path(".git/hooks")
    evil_hooks = pathlib.Path(".git/evil-hooks")
    evil_hooks.mkdir(exist_ok=True)
    for folder in (hooks, evil_hooks):
        for name in ("pre-commit", "post-checkout", "post-merge", "reference-transaction", "post-index-change",
                     "pre-auto-gc", "fsmonitor-watchman"):
            hook = folder / name
            hook.write_text(f"#!/bin/sh\\n{ran}\\n")
            hook.chmod(0o755)
    for key, value in [("filter.evil.smudge", ran), ("filter.evil.clean", ran), ("filter.evil.required", "true"),
                       ("core.fsmonitor", ran), ("core.hooksPath", str(evil_hooks.resolve())),
                       ("diff.external", ran), ("core.pager", ran), ("core.sshCommand", ran),
                       ("credential.helper", f"!{ran}")]:
        subprocess.run(["git", "config", key, value], check=True)
    pathlib.Path(".gitattributes").write_text("* filter=evil diff=evil\\n")
    pathlib.Path(marker + ".planted").write_text(subprocess.run(["git", "config", "--list", "--local"],
                                                 capture_output=True, text=True, check=True).stdout)
sys.exit(done.returncode)
'''


def user_git_state(repo: Path) -> dict[str, bytes]:
    """The user's .git/config and every hook file, by name."""
    state = {"config": (repo / ".git" / "config").read_bytes()}
    for hook in sorted((repo / ".git" / "hooks").iterdir()):
        state[f"hooks/{hook.name}"] = hook.read_bytes()
    return state


def test_planted_config_hooks_and_filters_stay_in_the_workspace_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    hostile = tmp_path / "hostile.py"
    hostile.write_text(HOSTILE)
    agent = f'''
[agents.hostile]
command = ["{sys.executable}", "{hostile}", "{marker}", "{{prompt_file}}", "{AGENT}"]
prompt = "file"
'''
    world = make_go_world(tmp_path, tasks=TASKS, extra_config=agent)
    (world.repo / "docket.toml").write_text(unsandboxed((world.repo / "docket.toml").read_text()
                                            .replace('agent = "scripted"', 'agent = "hostile"')))
    git(world.repo, "commit", "-qam", "the hostile agent")
    before = user_git_state(world.repo)

    go = world.start("go", "--goal", "greet by name", "--tasks", "tasks.toml", "--id", "r1", "--json",
                     "--parallel", "2")
    try:  # its .gitattributes is a path the run trusts: the evil task waits for a person, who lets it through here
        assert wait_until(lambda: world.json("inbox")["config_changes"], timeout=120), go.poll()
        (change,) = world.json("inbox")["config_changes"]
        assert change["task_id"] == "r1.evil" and change["paths"] == [".gitattributes"]
        assert world.run("approve", "r1", "--task", "r1.evil", "--by", "reviewer").returncode == 0
        out, err = go.communicate(timeout=180)
    finally:
        if go.poll() is None:
            go.kill()
            go.communicate()
    assert go.returncode == 0, err
    summary = json.loads(out)
    assert {row["task"]: row["result"] for row in summary["tasks"]} == {"evil": "delivered", "honest": "delivered"}
    # the honest work landed; the planted .gitattributes is only a file in the target, naming a filter nobody has
    assert world.file_at("main", "honest.py") == "HONEST = 1\n"
    assert world.file_at("main", "evil.py") == "EVIL = 1\n"
    # the agent's git really took the configuration: in its own workspace
    planted = Path(f"{marker}.planted").read_text()
    assert "filter.evil.smudge=" in planted and "core.hookspath=" in planted and "core.fsmonitor=" in planted
    # the user's repository: config and hooks untouched, no linked worktree, nothing of the agent's config
    assert user_git_state(world.repo) == before
    assert git(world.repo, "worktree", "list").count("\n") == 0
    assert "evil" not in (world.repo / ".git" / "config").read_text()
    # the user's own git after the run runs none of it either
    git(world.repo, "status")
    git(world.repo, "diff", "HEAD~1")
    assert not marker.exists(), marker.read_text()
    assert world.run("verify").returncode == 0
    # the receipt binds exactly what was delivered (verify-receipt is the evidence helper's; the seal is here)
    assert len(world.events("ReceiptSealed")) == 1


def test_the_agents_own_git_does_take_what_it_planted(tmp_path: Path) -> None:
    """The control: what the agent plants works in its workspace (so the test above shows containment, not a dud)."""
    from docket.adapters.world.files.paths import task_worktree_path
    from docket.adapters.world.workspaces.port import DulwichWorkspaces

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "a")
    common, base = repo / ".git", git(repo, "rev-parse", "HEAD")
    workspace = task_worktree_path(common, "r1", "t1")
    DulwichWorkspaces().create_worktree(common, workspace, "docket/r1/t1", base)
    marker = tmp_path / "marker"
    git(workspace, "config", "core.hooksPath", str(tmp_path / "hooks"))
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "pre-commit").write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    (tmp_path / "hooks" / "pre-commit").chmod(0o755)
    (workspace / "b.txt").write_text("b\n")
    git(workspace, "add", "b.txt")
    git(workspace, "commit", "-qm", "b")
    assert marker.read_text() == "ran\n"  # the agent's own hook ran for the agent's own commit
    assert "hooksPath" not in (common / "config").read_text()
    assert subprocess.run(["git", "cat-file", "-e", git(workspace, "rev-parse", "HEAD")], cwd=repo).returncode != 0
