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
    # t3 and t4 change line 30 both: whichever is queued second (--parallel counts agents only, so either may
    # pass its check first) is foreseen to conflict, conflicts, and fails its one cycle
    queued = {e["payload"]["task_id"]: e["payload"] for e in world.events("IntegrationStepQueued")}
    first, second = sorted(("q.t3", "q.t4"), key=lambda t: queued[t]["step"])
    results = {row["task_id"]: row for row in summary["tasks"]}
    assert {t: r["result"] for t, r in results.items()} == {
        "q.t1": "delivered", "q.t2": "delivered", first: "delivered", second: "failed"}, (done.stdout, done.stderr)
    assert results[second]["code"] == "integration-conflict"
    merged = world.file_at("main", "big.py").splitlines()
    value = {"q.t3": "v30 = 'three'", "q.t4": "v30 = 'four'"}[first]
    assert (merged[3], merged[30], merged[57]) == ("v3 = 'top'", value, "v57 = 'bottom'")
    # t1, t2 and t3 all change big.py, far apart: no warning; t3 and t4 change its line 30: one warning, by lines
    assert summary["overlaps"] == [{"first_task": first, "second_task": second, "paths": ["big.py"],
                                   "whole_files": []}]
    assert {t: q["predicted_conflicts"] for t, q in queued.items()} == {
        "q.t1": [], "q.t2": [], first: [], second: ["big.py"]}
    status = world.run("status", "q", "--json")
    assert status.returncode == 0, status.stderr
    steps = {s["task_id"]: s for s in json.loads(status.stdout)["integration_steps"]}
    assert steps[second]["predicted_conflicts"] == ["big.py"] and steps[second]["status"] == "conflicted"
    assert steps["q.t1"]["predicted_conflicts"] == []
    text = world.run("go", "--resume", "q").stdout
    assert f"{first} and {second} change the same lines of big.py" in text, text
