"""Conflicts foreseen as `docket go` queues a step (issue 37, item 5): two tasks that change one big file far apart
are not warned of; two that change the same lines are, once, and the second's conflict is foreseen when it is
queued, shown by `docket status` before its turn comes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world

LINES = [f"v{n} = {n}" for n in range(60)]


def _big(**changed: str) -> str:
    """big.py with some lines changed, as a scripted agent's write directive spells it (``\\n``, escaped once more
    in the TOML string)."""
    return "\\\\n".join(changed.get(f"v{n}", line) for n, line in enumerate(LINES))


TASKS = f'''\
[[tasks]]
id = "t1"
title = "top"
prompt = "write big.py: {_big(v3="v3 = 'top'")}"

[[tasks]]
id = "t2"
title = "bottom"
prompt = "write big.py: {_big(v57="v57 = 'bottom'")}"

[[tasks]]
id = "t3"
title = "middle"
prompt = "write big.py: {_big(v30="v30 = 'three'")}"

[[tasks]]
id = "t4"
title = "middle again"
prompt = "write big.py: {_big(v30="v30 = 'four'")}"
'''


def test_only_changes_to_the_same_lines_warn_and_the_conflict_is_foreseen_at_enqueue(tmp_path: Path) -> None:
    world = make_go_world(tmp_path, tasks=TASKS, extra_config='\n[checks.ok]\ncommand = ["true"]\n')
    (world.repo / "big.py").write_text("\n".join(LINES) + "\n")
    git(world.repo, "add", "big.py")
    git(world.repo, "commit", "-q", "-m", "one big module")
    done = world.run("go", "--goal", "big", "--tasks", "tasks.toml", "--target", "main", "--id", "q", "--parallel",
                     "1", "--cycles", "1", "--json")
    summary = json.loads(done.stdout)
    assert "tasks" in summary, (done.stdout, done.stderr)
    assert [row["result"] for row in summary["tasks"]] == ["delivered"] * 3 + ["failed"], (done.stdout, done.stderr)
    assert summary["tasks"][3]["code"] == "integration-conflict"
    merged = world.file_at("main", "big.py").splitlines()
    assert (merged[3], merged[30], merged[57]) == ("v3 = 'top'", "v30 = 'three'", "v57 = 'bottom'")
    # t1, t2 and t3 all change big.py, far apart: no warning; t3 and t4 change its line 30: one warning, by lines
    assert summary["overlaps"] == [{"first_task": "q.t3", "second_task": "q.t4", "paths": ["big.py"],
                                   "whole_files": []}]
    queued = {e["payload"]["task_id"]: e["payload"] for e in world.events("IntegrationStepQueued")}
    assert {t: q["predicted_conflicts"] for t, q in queued.items()} == {
        "q.t1": [], "q.t2": [], "q.t3": [], "q.t4": ["big.py"]}
    status = world.run("status", "q", "--json")
    assert status.returncode == 0, status.stderr
    steps = {s["task_id"]: s for s in json.loads(status.stdout)["integration_steps"]}
    assert steps["q.t4"]["predicted_conflicts"] == ["big.py"] and steps["q.t4"]["status"] == "conflicted"
    assert steps["q.t1"]["predicted_conflicts"] == []
    text = world.run("go", "--resume", "q").stdout
    assert "q.t3 and q.t4 change the same lines of big.py" in text, text
