"""Attack: the agent of one task writes into another task's workspace by path.

Without a sandbox the write itself succeeds on disk (workspaces are plain folders of one user); what docket
answers is attribution: each pin records exactly what it captured from its own workspace, so a file planted in a
workspace whose task was already pinned reaches no candidate, no target and no receipt, and the intruder's own
candidate holds only its own files. The sandbox (Landlock) denies the write itself: agent_roots gives an agent
exactly its own workspace to write, and no other workspace even to read; this test checks that seam too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from docket.adapters.world.workspaces.port import agent_roots
from tests.attacks.attacker_world import honest_and, task
from tests.conftest import git
from tests.e2e.go_world import AGENT, make_go_world, unsandboxed

TASKS = honest_and(task("intruder", "write into the other task's workspace", "Intrude.", "write mine.py: MINE = 1",
                        "INTRUDE", depends_on="greet"))

INTRUDER = '''\
"""The scripted agent, then (when told) a write into every sibling workspace of the run."""
import pathlib, subprocess, sys

log, prompt_file = pathlib.Path(sys.argv[1]), sys.argv[2]
done = subprocess.run([sys.executable, sys.argv[3], "--prompt-file", prompt_file])
if "INTRUDE" in pathlib.Path(prompt_file).read_text():
    here = pathlib.Path.cwd()
    for sibling in sorted(here.parent.iterdir()):
        if sibling != here and not sibling.name.startswith("."):
            try:
                (sibling / "planted.py").write_text("PLANTED = 1\\n")
                (sibling / "greet.py").write_text("print('pwned')\\n")
                with log.open("a") as f:
                    f.write(f"wrote {sibling}\\n")
            except OSError as e:
                with log.open("a") as f:
                    f.write(f"denied {sibling}: {e}\\n")
sys.exit(done.returncode)
'''


def test_a_write_into_a_pinned_tasks_workspace_reaches_no_candidate_target_or_receipt(tmp_path: Path) -> None:
    log = tmp_path / "intrusions"
    intruder = tmp_path / "intruder.py"
    intruder.write_text(INTRUDER)
    agent = f'''
[agents.intruder]
command = ["{sys.executable}", "{intruder}", "{log}", "{{prompt_file}}", "{AGENT}"]
prompt = "file"
'''
    world = make_go_world(tmp_path, tasks=TASKS, extra_config=agent)
    (world.repo / "docket.toml").write_text(unsandboxed((world.repo / "docket.toml").read_text()
                                            .replace('agent = "scripted"', 'agent = "intruder"')))
    git(world.repo, "commit", "-qam", "the intruding agent")

    done = world.go("r1", "--parallel", "2")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert {row["task"]: row["result"] for row in summary["tasks"]} == {"greet": "delivered",
                                                                        "intruder": "delivered"}
    requested = {e["payload"]["task_id"]: Path(e["payload"]["path"]) for e in world.events("WorktreeRequested")}
    # without a sandbox the write happened on disk, into greet's workspace
    assert f"wrote {requested['r1.greet']}" in log.read_text()
    # ... and reached nothing: the target has greet's own work and the intruder's own file, not the planted ones
    assert world.file_at("main", "greet.py") == 'print("hello")\n'
    assert world.file_at("main", "mine.py") == "MINE = 1\n"
    assert "planted.py" not in git(world.repo, "ls-tree", "-r", "--name-only", "main").splitlines()
    # each pin of a workspace recorded exactly what it captured from that workspace, and nothing planted
    pins = [e["payload"] for e in world.events("CandidatePinRequested")]
    assert all("planted.py" not in pin["changed_paths"] for pin in pins)
    by_workspace = {(pin["task_id"], pin["worktree"]): pin["changed_paths"] for pin in pins
                    if pin["worktree"] in map(str, requested.values())}
    assert by_workspace[("r1.greet", str(requested["r1.greet"]))] == ["greet.py"]
    assert "mine.py" in by_workspace[("r1.intruder", str(requested["r1.intruder"]))]
    assert world.run("verify").returncode == 0


def test_the_sandbox_seam_gives_an_agent_no_other_workspace(tmp_path: Path) -> None:
    from docket.adapters.world.files.paths import task_worktree_path

    common = tmp_path / "repo" / ".git"
    mine, theirs = task_worktree_path(common, "r1", "r1.b"), task_worktree_path(common, "r1", "r1.a")
    writes, reads = agent_roots(common, mine)
    assert writes == [mine]
    assert reads == [common / "objects"]
    for root in writes + reads:
        assert not theirs.is_relative_to(root) and not root.is_relative_to(theirs)
