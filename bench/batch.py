"""The merge queue that batches: check runs spent integrating a run with ``[integration] batch = N`` against one per step.

32 tasks, each with a one-line ``sh`` agent, run by ``docket go --parallel 1`` in a fresh repository whose base has
``lib.sh`` (a function ``greet``). Task i adds ``t<i>.sh``, which sources lib.sh; task 5's calls ``greet``; task 17
renames ``greet`` to ``hello`` in lib.sh and in every ``t*.sh`` it finds. Each task's own check passes (task 17's
worktree starts from the base, where nothing calls greet), but merged after task 5 the suite fails: the required
check runs every ``t*.sh``. Task 17 is rejected at integration, its next generation starts from the integrated head
(which has t5.sh, renamed there too) and passes. Sides, taking turns: the same run with ``batch = 8`` and with
``batch = 1`` (a check run per step). Figures: the check runs on integration candidates (``integration-<step>``
pins), from each run's ledger; both sides must end with the same target tree (checked). Goal: <= 12 with batching
(one per step: 32, plus the repaired step's).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .common import BIN, Row, log, median, remove, temp_dir
from .go import git, load, timed_process

TASKS = 32
BATCH = 8
CALLER, RENAMER = 5, 17
GOAL_CHECKS = 12

AGENT = 'eval "$(printf %s "$0" | head -n 1)"'  # the prompt's first line is the script (feedback follows it)
CHECK = 'for f in t*.sh; do [ -f "$f" ] || continue; sh "$f" >/dev/null || exit 1; done'


def config(batch: int) -> str:
    return f'''\
agent = "one-line"

[agents.one-line]
command = ["sh", "-c", {AGENT!r}, "{{prompt}}"]

[checks.suite]
command = [{CHECK!r}]
shell = true

[integration]
batch = {batch}
speculate = 1
'''


def script(i: int, caller: int = CALLER, renamer: int = RENAMER) -> str:
    """Task i's agent, one line of sh."""
    if i == renamer:
        return 'for f in lib.sh t*.sh; do [ -f "$f" ] && sed -i s/greet/hello/g "$f"; done; true'
    call = "greet" if i == caller else "true"
    return f"printf '. ./lib.sh\\n{call}\\n' > t{i}.sh"


def tasks_file(path: Path, tasks: int, caller: int = CALLER, renamer: int = RENAMER) -> Path:
    blocks = [f'[[tasks]]\nid = "t{i}"\ntitle = "task {i}"\nprompt = {json.dumps(script(i, caller, renamer))}\n'
              for i in range(1, tasks + 1)]
    path.write_text("\n".join(blocks))
    return path


@dataclass
class Outcome:
    check_runs: int  # check runs on integration candidates (the merge queue's)
    tree: str  # the target's tree at the end
    wall_s: float
    ranges: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last, passed|failed) per check run


def make_repository(repo: Path, batch: int) -> Path:
    """A fresh repository whose base has README.md and lib.sh; docket.toml (which differs between the sides) is
    left out of git (info/exclude), so both sides' target trees can be compared."""
    from .launch import environment

    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    (repo / "lib.sh").write_text("greet() { echo hi; }\n")
    git(repo, "add", "README.md", "lib.sh")
    git(repo, "commit", "-q", "-m", "first")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    with (repo / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("docket.toml\n")
    (repo / "docket.toml").write_text(config(batch))
    subprocess.run([str(BIN / "docket"), "init"], cwd=repo, env=environment(), check=True, capture_output=True)
    return repo


def run_queue(folder: Path, tasks_toml: Path, batch: int) -> Outcome:
    """docket go --parallel 1 of the tasks with [integration] batch; what its merge queue spent and delivered."""
    repo = make_repository(temp_dir(folder) / "repo", batch)
    argv = [str(BIN / "docket"), "go", "--goal", "bench", "--tasks", str(tasks_toml), "--target", "main",
            "--parallel", "1", "--id", "batch", "--cycles", "3"]
    timed = timed_process(argv, repo)
    runs, ranges = integration_checks(repo)
    return Outcome(runs, git(repo, "rev-parse", "main^{tree}"), timed.wall_s, ranges)


def integration_checks(repo: Path) -> tuple[int, list[tuple[int, int, str]]]:
    """The check runs the run's merge queue made (on integration-<step> pins), and each one's verdict as recorded."""
    from .launch import environment

    events = json.loads(subprocess.run([str(BIN / "docket"), "log", "--json"], cwd=repo, env=environment(),
                                       check=True, capture_output=True, text=True).stdout)["events"]
    pins = {e["payload"]["binding_id"] for e in events if e["type"].startswith("CandidatePinRequested")
            and e["payload"]["boundary"].startswith("integration-")}
    runs = sum(1 for e in events if e["type"].startswith("CheckRequested") and e["payload"]["binding_id"] in pins)
    ranges = []
    for e in events:
        kind, p = e["type"].split(".")[0], e["payload"]
        if kind in ("IntegrationBatchVerified", "IntegrationBatchFailed"):
            ranges.append((p["first_step"], p["last_step"], "passed" if kind.endswith("Verified") else "failed"))
        elif kind in ("IntegrationStepVerified", "IntegrationStepRejected"):
            ranges.append((p["step"], p["step"], "passed" if kind.endswith("Verified") else "failed"))
    return runs, ranges


@dataclass
class Sides:
    batched: list[Outcome] = field(default_factory=list)
    per_step: list[Outcome] = field(default_factory=list)


def measure(folder: Path, tasks: int, batch: int, rounds: int, caller: int = CALLER, renamer: int = RENAMER) -> Sides:
    """Both sides `rounds` times, taking turns; every run must end with the same target tree."""
    tasks_toml = tasks_file(folder / "tasks.toml", tasks, caller, renamer)
    sides = Sides()
    for i in range(rounds):
        order = [("batched", batch), ("per_step", 1)]
        for name, size in (order if i % 2 == 0 else order[::-1]):
            getattr(sides, name).append(run_queue(folder, tasks_toml, size))
    trees = {o.tree for o in sides.batched + sides.per_step}
    if len(trees) != 1:
        raise RuntimeError(f"the sides delivered different trees: {sorted(trees)}")
    return sides


def run(quick: bool) -> list[Row]:
    rounds = 1 if quick else 2
    load_at_start, at_start = load()
    folder = temp_dir()
    try:
        sides = measure(folder, TASKS, BATCH, rounds)
    finally:
        remove(folder)
    _, at_end = load()
    batched = median([o.check_runs for o in sides.batched])
    per_step = median([o.check_runs for o in sides.per_step])
    log(f"batch: check runs {batched} with batch = {BATCH} vs {per_step} with batch = 1; "
        f"ranges {sides.batched[0].ranges}; at the start {at_start}, at the end {at_end}")
    wall_b, wall_s = median([o.wall_s for o in sides.batched]), median([o.wall_s for o in sides.per_step])
    return [
        Row("batch", f"merge queue check runs, {TASKS} tasks (one breaks the suite merged with another), "
                     f"batch = 1, median of {rounds}", per_step, "runs"),
        Row("batch", f"the same run with batch = {BATCH} (same final tree, checked)", batched, "runs",
            ratio=batched / per_step, goal=f"<= {GOAL_CHECKS}", passed=batched <= GOAL_CHECKS),
        Row("batch", f"(information) 'docket go' whole process, batch = {BATCH} vs batch = 1 ({wall_s:.1f} s)",
            wall_b, "s", ratio=wall_b / wall_s),
        Row("batch", f"(information) the machine: at the start {at_start}; at the end {at_end}", load_at_start,
            "load"),
    ]
