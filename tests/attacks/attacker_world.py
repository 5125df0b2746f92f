"""A `docket go` world whose agent is workspace_attacker.py: each task's prompt names the attacks it makes."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import AGENT, GoWorld, make_go_world

ATTACKER = Path(__file__).with_name("workspace_attacker.py")


def attacker_world(tmp_path: Path, tasks: str, *, outside: Path | None = None, extra: str = "") -> GoWorld:
    """A world running tasks with the attacking agent (outside: the file it may name outside its workspace)."""
    more = f', "{outside}"' if outside is not None else ""
    agent = (f'[agents.attacker]\ncommand = ["{sys.executable}", "{ATTACKER}", "{{prompt_file}}", "{AGENT}"{more}]\n'
             f'prompt = "file"\n{extra}')
    world = make_go_world(tmp_path, tasks=tasks, extra_config=agent)
    config = world.repo / "docket.toml"
    config.write_text(config.read_text().replace('agent = "scripted"', 'agent = "attacker"'))
    git(world.repo, "commit", "-qm", "the attacking agent", "-a")
    return world


def results(done) -> dict[str, str]:  # noqa: ANN001
    """task -> result of a `docket go --json`."""
    import json

    return {row["task"]: row["result"] for row in json.loads(done.stdout)["tasks"]}


def feedback(world: GoWorld, task: str) -> list[str]:
    """The feedback recorded for the task's generations, in order."""
    return [e["payload"]["feedback"] for e in world.events("TaskFeedbackRecorded")
            if e["payload"]["task_id"].split(".", 1)[1] == task]
