"""[workspace] root: where a task's workspace and its checks' executions are made, instead of docket's data folder."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git

CONFIG = '''\
[workspace]
root = "{root}"

[checks.has-a]
command = ["test", "-f", "a.txt"]
'''


def test_a_workspace_and_its_executions_are_made_under_the_configured_root(docket, repo, tmp_path, data_dir):
    root = tmp_path / "elsewhere"
    (repo / "docket.toml").write_text(CONFIG.format(root=root))
    git(repo, "add", "docket.toml")
    git(repo, "commit", "-qm", "config")
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("task", "plan", "r1", "--title", "t", "--id", "t1")
    launched = docket("worker", "launch", "r1", "--task", "t1", "--json", "--", "sh", "-c", "echo a > a.txt").json()
    assert launched["result"] == "ok", launched
    events = json.loads(docket("log", "--json").stdout)["events"]
    [requested] = [e["payload"] for e in events if e["type"] == "WorktreeRequested.v2"]
    workspace = Path(requested["path"])
    identity = (repo / ".git" / "docket" / "repository-id").read_text().strip()
    assert workspace == root / "workspaces" / identity / "r1" / "t1"
    assert (workspace / "a.txt").read_text() == "a\n"
    assert not data_dir.exists()  # nothing in the default data folder
    checked = docket("check", "run", launched["pin"]["candidate"]["binding_id"], "--json", check=False)
    events = json.loads(docket("log", "--json").stdout)["events"]
    executions = [Path(e["payload"]["execution"]) for e in events if e["type"] == "CheckRequested.v1"]
    assert executions and all(p.is_relative_to(root / "executions" / identity) for p in executions), checked.stdout
    assert [e for e in events if e["type"] == "CheckPassed.v1"], checked.stdout


def test_reconcile_looks_under_the_configured_root_too(docket, repo, tmp_path):
    root = tmp_path / "elsewhere"
    (repo / "docket.toml").write_text(CONFIG.format(root=root))
    git(repo, "add", "docket.toml")
    git(repo, "commit", "-qm", "config")
    docket("init")
    identity = (repo / ".git" / "docket" / "repository-id").read_text().strip()
    stray = root / "workspaces" / identity / "gone-run" / "gone-task"
    stray.mkdir(parents=True)  # no record owns it: reconcile must see it there, not only in the data folder
    found = json.loads(docket("reconcile", "--json", check=False).stdout)
    assert [f["path"] for f in found["git"] if f["kind"] == "worktree"] == [str(stray)], found
