"""`docket go` worlds for the attack tests: one whose agent is workspace_attacker.py (each task's prompt names the
attacks it makes), one whose agent is an intruder's script; and the tasks files they run."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import AGENT, GoWorld, make_go_world

ATTACKER = Path(__file__).with_name("workspace_attacker.py")


def task(id: str, title: str, *prompt: str, depends_on: str | None = None) -> str:  # noqa: A002
    """One [[tasks]] table of a tasks file; its prompt is the lines given, one a line."""
    after = f'depends_on = ["{depends_on}"]\n' if depends_on is not None else ""
    lines = "\n".join(prompt)
    return f'[[tasks]]\nid = "{id}"\ntitle = "{title}"\n{after}prompt = """{lines}\n"""\n'


HONEST = task("greet", "greet", "Greet.", 'write greet.py: print("hello")')


def honest_and(*attacks: str) -> str:
    """A tasks file: the honest task (greet, which lands whatever the others do), then the attacking tasks."""
    return "\n".join((HONEST, *attacks))


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


def intruder_world(tmp_path: Path, tasks: str, agent: str, *, script: str, script_text: str, config: str,
                   message: str) -> GoWorld:
    """A world whose agent `intruder` runs the Python code agent (the prompt on stdin), with script, an executable
    file of the repository holding script_text, and config added to docket.toml (`{repo}` in it stands for the
    repository's path), both committed as message."""
    code = tmp_path / "intruder.py"
    code.write_text(agent)
    world = make_go_world(tmp_path, tasks=tasks)
    (world.repo / script).write_text(script_text)
    (world.repo / script).chmod(0o755)
    docket_toml = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "intruder"', 1)
    (world.repo / "docket.toml").write_text(docket_toml + f'''
[agents.intruder]
command = ["{sys.executable}", "{code}"]
prompt = "stdin"
''' + config.replace("{repo}", str(world.repo)))
    git(world.repo, "add", script, "docket.toml")
    git(world.repo, "commit", "-q", "-m", message)
    return world
