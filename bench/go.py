"""docket go: its own overhead in a whole run, and what --parallel buys.

Every measurement runs in a fresh throwaway git repository (one commit of a
README and docket.toml; ``docket init`` for docket's side), made before the
clock starts; the tasks file lies outside it. Sides take turns, the order reversed every other
round; the figures are medians.

Overhead, on two layouts: a tiny repository (a README and docket.toml), and a real project's shape (5,000 files
in 1,800 nested folders, bench/workspaces.py's generated repository, docket.toml committed on top). 8 tasks, each
telling its agent which file to write. The agent is
``sh -c 'echo "changed by $0" > "$0"' FILE``, a one-line change that costs a
fork and an exec, so the difference between the two sides is docket's own
work and not an agent's start (the scripted agent would add a Python start per
task to both sides, about 30 ms, and only noise to the difference). The check
is ``true``. Sides: ``docket go --parallel 1`` as a whole process, from its
start to its exit (open, plan, a worktree, the agent, pin, check, hand-off for
each task; integrate in task order through the merge queue, re-running the
check on each step; seal, complete; the clean checkout of the target moved
with it); and one ``sh`` process running the work a person would script
without docket, for each task: ``git worktree add`` a new branch at the base,
the agent there, the check (``env true``, a process), ``git add -A`` and
``git commit``, then ``git merge --no-ff`` into the checked-out target. Both must end with the same
target tree (checked). Figures: the ratio, and docket's overhead per task,
(go - loop) / 8. Goal (issue 22, goal 1): at most 100 ms per task, on each layout. For information: the CPU time
(user + system) of docket go and every process it waited for, per task; and
where docket go's time goes, from the timestamps its ledger recorded: each gap
between consecutive events is charged to the phase of the event that ends it (PHASES, phase_labels),
from the process's start to its exit. The merge queue runs beside the agents, so these phases overlap in time.

Parallelism. 8 tasks whose agent is the scripted agent of examples/ sleeping
2 s, then writing its file (``sleep: 2`` / ``write FILE: ...``);
``docket go --parallel 4`` against ``--parallel 1``. Goal: the parallel run
under 0.35x the serial time (the sleeps alone give 0.25x).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from docket.domain import events as ev

from .common import BIN, WORK, Row, log, median, remove, temp_dir
from .launch import environment

TASKS = 8
OVERHEAD_GOAL_S = 0.1  # issue 22, goal 1: per task, on each layout
NESTED = (5000, 1800)  # files, folders: a real project's shape (bench/workspaces.py's generated repository)
LAYOUTS = ("tiny", "nested")
PARALLEL_GOAL = 0.35
SCRIPTED_AGENT = Path(__file__).resolve().parents[1] / "examples" / "scripted_agent.py"
SH_AGENT = 'echo "changed by $0" > "$0"'  # run as: sh -c SH_AGENT FILE

ONE_LINE_CONFIG = f'''\
agent = "one-line"

[agents.one-line]
command = ["sh", "-c", {SH_AGENT!r}, "{{prompt}}"]

[checks.noop]
command = ["true"]
'''

SCRIPTED_CONFIG = f'''\
agent = "scripted"

[agents.scripted]
command = ["{sys.executable}", "{SCRIPTED_AGENT}", "--prompt-file", "{{prompt_file}}"]
prompt = "file"

[checks.noop]
command = ["true"]
'''

# The shell loop: $1 the agent's sh -c script, $2 the worktrees' folder, then the files, one per task.
# The check runs as a process (env true), as docket's does, not as the shell's builtin.
LOOP = '''\
set -e
agent=$1; worktrees=$2; shift 2
base=$(git rev-parse HEAD)
for file in "$@"; do
  git worktree add -q -b "task/$file" "$worktrees/$file" "$base"
  (cd "$worktrees/$file" && sh -c "$agent" "$file" && env true && git add -A && git commit -q -m "task $file")
  git merge -q --no-ff --no-edit "task/$file"
done
'''


def files(tasks: int) -> list[str]:
    return [f"file{i}.txt" for i in range(1, tasks + 1)]


def tasks_file(path: Path, tasks: int, sleep: float | None = None) -> Path:
    """A tasks file: task ti writes file i (after sleeping, with the scripted agent, when sleep is given)."""
    blocks = []
    for i, name in enumerate(files(tasks), start=1):
        prompt = name if sleep is None else f"sleep: {sleep}\\nwrite {name}: changed by {name}"
        blocks.append(f'[[tasks]]\nid = "t{i}"\ntitle = "change {name}"\nprompt = "{prompt}"\n')
    path.write_text("\n".join(blocks))
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=environment(), check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repository(repo: Path, config: str, *, with_ledger: bool, layout: str = "tiny",
                    nested: tuple[int, int] = NESTED) -> Path:
    """A fresh repository at repo: tiny (a README and docket.toml), or nested (a copy of bench/workspaces.py's
    generated repository of nested[0] files in nested[1] folders, docket.toml committed on top)."""
    if layout == "nested":
        from .workspaces import prepare

        source = WORK / f"workspaces-{nested[0]}" if nested == NESTED else WORK / f"go-nested-{nested[0]}-{nested[1]}"
        prepare(source, *nested)
        if not (source / ".git" / "docket-bench-packed").exists():  # loose objects would start git's auto gc on
            git(source, "-c", "gc.autoDetach=false", "gc", "-q")   # every commit, and race the copy
            (source / ".git" / "docket-bench-packed").write_text("")
        shutil.copytree(source, repo, symlinks=True)
        git(repo, "checkout", "-q", "-B", "main")
    else:
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        (repo / "README.md").write_text("hello\n")
        git(repo, "add", "README.md")
    (repo / "docket.toml").write_text(config)
    git(repo, "add", "docket.toml")
    git(repo, "commit", "-q", "-m", "first")
    if with_ledger:
        subprocess.run([str(BIN / "docket"), "init"], cwd=repo, env=environment(), check=True,
                       capture_output=True)
    return repo


@dataclass
class Timed:
    wall_s: float
    cpu_s: float  # user + system of the process and every process it waited for


def timed_process(argv: list[str], cwd: Path) -> Timed:
    """Wall and CPU time of one whole process, which must succeed."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu)


def go(folder: Path, config: str, tasks: Path, parallel: int, phases: dict[str, list[float]] | None = None,
       layout: str = "tiny", nested: tuple[int, int] = NESTED) -> tuple[Timed, str]:
    """docket go in a fresh repository under folder: its times and the target's tree. With phases, each phase's
    seconds in this run are appended to phases[label]."""
    repo = make_repository(temp_dir(folder) / "repo", config, with_ledger=True, layout=layout, nested=nested)
    argv = [str(BIN / "docket"), "go", "--goal", "bench", "--tasks", str(tasks), "--target", "main",
            "--parallel", str(parallel), "--id", "bench"]
    started = time.time()
    timed = timed_process(argv, repo)
    if phases is not None:
        for label, seconds in phases_of(repo, started, started + timed.wall_s).items():
            phases.setdefault(label, []).append(seconds)
    return timed, git(repo, "rev-parse", "main^{tree}")


# Where a serial run's time goes: each gap between consecutive events (and from the process's start to the first,
# from the last to its exit) is charged to the phase of the later event. Meaningful for --parallel 1 only.
PHASES = (
    ("start: interpreter, imports, docket.toml, tasks file", (ev.RunOpened,)),
    ("the agents, to their recorded exits", (ev.WorkerExited,)),
    ("judging each generation: pin, check, hand-off", (
        ev.LeaseReleased, ev.RunUnsupervised, ev.CandidatePinRequested, ev.CandidatePinned, ev.CheckRequested,
        ev.ExecutionRequested, ev.ExecutionCreated, ev.CheckLaunchRequested, ev.CheckLaunched, ev.CheckPassed,
        ev.ExecutionRemovalRequested, ev.ExecutionRemoved, ev.HandoffOffered, ev.HandoffConfirmed, ev.TaskFinished)),
    ("to the next task's start (the main loop's tick)", (ev.WorkerRegistered,)),
    ("launching: worktree, lease, spawn", (ev.RunSupervised, ev.WorktreeRequested, ev.WorktreeCreated,
                                           ev.WorktreePrepared, ev.LeaseGranted, ev.WorkerLaunchRequested,
                                           ev.WorkerLaunched)),
)
INTEGRATING = "integrating in task order (each step merged and re-checked)"
MOVING = "moving the target after each step"
DELIVERING = "seal, complete, exit"
PLANNING = "pin the base, plan"
# The queue runs beside the agents (a step is merged while the next task's agent works), so a phase is found from
# the event that ends each gap, not from where the run is: a check's events inside a step (between its request and
# its verdict) are the step's; the target moves after each step; only what follows the queue's end is delivery.
_STEP_OPENED = {ev.IntegrationStepRequested.__name__}
_STEP_CLOSED = {cls.__name__ for cls in (ev.IntegrationStepVerified, ev.IntegrationStepFailed,
                                         ev.IntegrationStepConflicted, ev.IntegrationStepRejected,
                                         ev.IntegrationBatchVerified, ev.IntegrationBatchFailed)}
_QUEUE = {cls.__name__ for cls in (ev.IntegrationPrepared, ev.IntegrationStepQueued, ev.IntegrationStepRequested,
                                   ev.IntegrationStepMerged, ev.IntegrationBatchRequeued, ev.IntegrationRequeued)}
_MOVES = {cls.__name__ for cls in (ev.IntegrationTargetRequested, ev.IntegrationTargetMoved)}
_ENDS = {cls.__name__ for cls in (ev.IntegrationCompleted, ev.IntegrationQueueClosed, ev.ReceiptSealed,
                                  ev.RunCompleted)}


def phase_labels(names: list[str]) -> list[str]:
    """The phase of each gap, named by the event type (or "exit") that ends it, in a run's order (see above)."""
    of_type = {cls.__name__: label for label, classes in PHASES for cls in classes}
    launching = {cls.__name__ for label, classes in PHASES if label.startswith("launching") for cls in classes}
    labels, in_step, ended = [], False, False
    for name in names:
        if ended or name in _ENDS or name == "exit":
            ended = ended or name in (ev.IntegrationQueueClosed.__name__, ev.RunCompleted.__name__)
            labels.append(DELIVERING)
        elif name in _MOVES:
            labels.append(MOVING)
        elif name in launching:
            labels.append(of_type[name])
        elif name in _QUEUE or name in _STEP_CLOSED or in_step:
            labels.append(INTEGRATING)
        else:
            labels.append(of_type.get(name, PLANNING))
        in_step = (in_step or name in _STEP_OPENED) and name not in _STEP_CLOSED
    return labels


def phases_of(repo: Path, started: float, ended: float) -> dict[str, float]:
    """Seconds per phase of the run recorded in repo's ledger (see PHASES), between the process's start and end."""
    log_json = subprocess.run([str(BIN / "docket"), "log", "--json"], cwd=repo, env=environment(), check=True,
                              capture_output=True, text=True).stdout
    events = [(datetime.fromisoformat(e["recorded_at"].replace("Z", "+00:00")).timestamp(), e["type"].split(".")[0])
              for e in json.loads(log_json)["events"]]
    gaps = [*events[1:], (ended, "exit")]  # the first is the ledger's genesis, made before the run
    spent: dict[str, float] = {}
    previous = started
    for (at, _), label in zip(gaps, phase_labels([name for _, name in gaps])):
        spent[label] = spent.get(label, 0.0) + max(0.0, at - previous)
        previous = max(previous, at)
    return spent


def shell_loop(folder: Path, tasks: int, layout: str = "tiny", nested: tuple[int, int] = NESTED
               ) -> tuple[Timed, str]:
    """The shell loop in a fresh repository under folder: its times and the target's tree."""
    where = temp_dir(folder)
    repo = make_repository(where / "repo", ONE_LINE_CONFIG, with_ledger=False, layout=layout, nested=nested)
    timed = timed_process(["sh", "-c", LOOP, "loop", SH_AGENT, str(where / "worktrees"), *files(tasks)], repo)
    return timed, git(repo, "rev-parse", "main^{tree}")


@dataclass
class Sides:
    wall_s: dict[str, list[float]] = field(default_factory=dict)
    cpu_s: dict[str, list[float]] = field(default_factory=dict)
    phases_s: dict[str, list[float]] = field(default_factory=dict)  # of docket go --parallel 1's runs, per phase


def take_turns(sides: dict[str, Callable[[], tuple[Timed, str]]], rounds: int) -> Sides:
    """Each side `rounds` times, taking turns (the order reversed every other round); every side must deliver the
    same target tree."""
    out = Sides({name: [] for name in sides}, {name: [] for name in sides})
    trees = set()
    for i in range(rounds):
        for name in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            timed, tree = sides[name]()
            out.wall_s[name].append(timed.wall_s)
            out.cpu_s[name].append(timed.cpu_s)
            trees.add(tree)
    if len(trees) != 1:
        raise RuntimeError(f"the sides delivered different trees: {sorted(trees)}")
    return out


def measure_overhead(folder: Path, tasks: int, rounds: int, layout: str = "tiny",
                     nested: tuple[int, int] = NESTED) -> Sides:
    """docket go --parallel 1 vs the shell loop, one-line agents, a no-op check, on the layout."""
    tasks_toml = tasks_file(folder / "one-line.toml", tasks)
    phases: dict[str, list[float]] = {}
    sides = take_turns({"go": lambda: go(folder, ONE_LINE_CONFIG, tasks_toml, 1, phases, layout, nested),
                        "loop": lambda: shell_loop(folder, tasks, layout, nested)}, rounds)
    sides.phases_s = phases
    return sides


def measure_parallel(folder: Path, tasks: int, sleep: float, parallel: int, rounds: int) -> Sides:
    """docket go --parallel N vs --parallel 1, agents that sleep then write."""
    tasks_toml = tasks_file(folder / "sleepy.toml", tasks, sleep)
    return take_turns({"parallel": lambda: go(folder, SCRIPTED_CONFIG, tasks_toml, parallel),
                       "serial": lambda: go(folder, SCRIPTED_CONFIG, tasks_toml, 1)}, rounds)


def load() -> tuple[float, str]:
    """The 1-minute load average, and the machine's cores with all three load averages."""
    one, five, fifteen = os.getloadavg()
    return one, f"{os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f}"


def run(quick: bool) -> list[Row]:
    rounds = 1 if quick else 3
    sleep, parallel = 2, 4
    load_at_start, at_start = load()
    log(f"machine: {at_start}")
    folder = temp_dir()
    try:
        overheads = {layout: measure_overhead(folder, TASKS, rounds, layout) for layout in LAYOUTS}
        parallelism = measure_parallel(folder, TASKS, sleep, parallel, rounds)
    finally:
        remove(folder)
    _, at_end = load()
    rows = []
    for layout, overhead in overheads.items():
        shape = "a tiny repository" if layout == "tiny" else f"{NESTED[0]:,} files in {NESTED[1]:,} nested folders"
        go_s, loop_s = median(overhead.wall_s["go"]), median(overhead.wall_s["loop"])
        per_task = (go_s - loop_s) / TASKS
        go_cpu, loop_cpu = median(overhead.cpu_s["go"]), median(overhead.cpu_s["loop"])
        log(f"go, {shape}: docket go {go_s:.2f} s vs the shell loop {loop_s:.2f} s for {TASKS} tasks "
            f"({per_task:.3f} s per task; CPU {go_cpu:.2f} s vs {loop_cpu:.2f} s)")
        rows += [
            Row("go", f"{shape}: shell loop, {TASKS} tasks (worktree add, one-line agent, check, commit, merge), "
                      f"whole process, median of {rounds}", loop_s, "s"),
            Row("go", f"{shape}: 'docket go --parallel 1', the same {TASKS} tasks, whole process, median of {rounds}",
                go_s, "s", ratio=go_s / loop_s),
            Row("go", f"{shape}: docket's overhead per task ((go - loop) / {TASKS})", per_task, "s",
                goal=f"<= {OVERHEAD_GOAL_S * 1000:.0f} ms", passed=per_task <= OVERHEAD_GOAL_S),
            Row("go", f"{shape}: (information) CPU of docket go and its children per task (the loop's: "
                      f"{loop_cpu / TASKS:.3f} s)", go_cpu / TASKS, "s", ratio=go_cpu / loop_cpu),
            *[Row("go", f"{shape}: (information) of docket go's time, {label} (per task: "
                        f"{median(times) / TASKS * 1000:.0f} ms)", median(times), "s")
              for label, times in overhead.phases_s.items()],
        ]
    par_s, ser_s = median(parallelism.wall_s["parallel"]), median(parallelism.wall_s["serial"])
    log(f"go: --parallel {parallel} {par_s:.2f} s vs --parallel 1 {ser_s:.2f} s ({par_s / ser_s:.2f}x); at the start "
        f"{at_start}, at the end {at_end}")
    return rows + [
        Row("go", f"'docket go --parallel 1', {TASKS} tasks whose agent sleeps {sleep} s, median of {rounds}",
            ser_s, "s"),
        Row("go", f"'docket go --parallel {parallel}', the same", par_s, "s", ratio=par_s / ser_s,
            goal=f"< {PARALLEL_GOAL}x", passed=par_s / ser_s < PARALLEL_GOAL),
        Row("go", f"(information) the machine: at the start {at_start}; at the end {at_end}", load_at_start,
            "load"),
    ]
