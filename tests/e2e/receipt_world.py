"""A run integrated through the real CLI, for the receipt tests: two tasks, each a worker's candidate with a passing
required check and an offered handoff, integrated into a branch nobody has checked out."""

from __future__ import annotations

from pathlib import Path

from ..conftest import Docket, git

RUN = "r1"
CHECKS = '[checks.ok]\ncommand = ["true"]\n'


def planned_run(docket: Docket, scripts: dict[str, str], config: str = CHECKS) -> dict[str, dict]:
    """The run with one task per script, each worker's candidate checked and offered; the candidates by task."""
    (docket.cwd / "docket.toml").write_text(config)
    git(docket.cwd, "branch", "release")  # the target: not checked out, so docket may move it
    docket("init")
    docket("run", "open", "--target", "release", "--goal", "two files", "--id", RUN)
    candidates = {}
    for task, script in scripts.items():
        docket("task", "plan", RUN, "--title", f"make {task}", "--id", task)
        candidate = docket("worker", "launch", RUN, "--task", task, "--json", "--", "sh", "-c",
                           script).json()["pin"]["candidate"]
        docket("check", "run", candidate["binding_id"], "--check", "ok")
        docket("handoff", "offer", candidate["binding_id"])
        candidates[task] = candidate
    return candidates


def keys(docket: Docket) -> tuple[Path, Path]:
    prefix = docket.cwd.parent / "keys" / "docket"
    prefix.parent.mkdir(exist_ok=True)
    docket("key", "generate", "--out", str(prefix))
    return prefix.with_suffix(".key"), prefix.with_suffix(".pub")


def clean_two_tasks(docket: Docket) -> dict[str, dict]:
    return planned_run(docket, {"t1": "echo one > one.txt", "t2": "echo two > two.txt"})


def conflicting_two_tasks(docket: Docket) -> dict[str, dict]:
    return planned_run(docket, {"t1": "echo one > same.txt", "t2": "echo two > same.txt"})
