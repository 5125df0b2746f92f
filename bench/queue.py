"""The merge queue that speculates (issue 37): how long a run's queue takes with docket's defaults against one
verification at a time (``[integration] speculate = 1, batch = 1``).

9 tasks, each with a one-line ``sh`` agent, run by ``docket go --parallel 9`` in a fresh repository whose base has
``lib.sh`` (a function ``greet``), so that the agents cost next to nothing and the queue is most of the run (the
agents of tasks 1, 3, 4, then 5, then 6..9 sleep 1, 2 and 3 s first, to order the queue: see delay). The one
required check, ``suite``, sleeps 4 s and then runs every ``t*.sh``. Task i adds ``t<i>.sh``, which sources lib.sh;
task 2's calls ``greet``; task 5 renames ``greet`` to ``hello`` in lib.sh and in every ``t*.sh`` its worktree has
(bench/batch.py's tasks). Each task's own check passes (task 5's worktree starts from the base, where nothing calls
greet), but merged after task 2 the suite fails, a semantic conflict no textual merge sees: task 5 is rejected back
to its task (``integration-rejected`` feedback), and its next generation starts from the integrated head and passes.
Task 5 is queued 5th of 9 when every check has a process at once; when the run's checks share fewer slots (``docket
go`` runs at most the machine's cores of them at once, tasks' and the queue's together), the order is the one the
slots free up in, and where task 5 was queued is logged for each run. Sides, taking turns in one process (the order reversed every other round): the same run
with ``speculate = 1`` and ``batch = 1`` in docket.toml ("serial", today's queue), and with neither key ("defaults").
docket.toml is kept out of git, so both sides' target trees can be compared: they must be equal (checked), and task
5 must have been rejected at integration in every run (checked).

Figures, medians: the queue's time (from the run's first IntegrationStepQueued to its RunCompleted, from the
ledger), the whole ``docket go`` process's wall and CPU time (user + system of it and every process it waited for).
Goal: the queue's time with the defaults <= 0.5x the serial one. For information: each run's integration check runs
(on ``integration-*`` pins), how long each waited for a slot and ran, and how many were in flight at once (logged
per run).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .batch import AGENT, CHECK as SUITE, script
from .common import BIN, Row, log, median, remove, temp_dir
from .go import git, load, timed_process

TASKS = 9
PARALLEL = 9
CALLER, RENAMER = 2, 5  # the renamer is queued 5th of 9: the middle of the queue
SLEEP_S = 4
CYCLES = 3
GOAL = 0.5
RUN_ID = "queue"
CHECK = f"sleep {SLEEP_S}; {SUITE}"
SIDES = {"serial": "[integration]\nspeculate = 1\nbatch = 1\n", "defaults": ""}


def delay(i: int) -> float:
    """How long task i's agent sleeps before its line. The tasks' own checks end in any order (within about half a
    second of each other when each has a process at once; in the order the run's check slots free up when they wait
    for one), and whichever of the caller and the renamer is merged second is the one rejected: the caller starts
    first, alone, so that its check is the first to hold a slot and the renamer is queued after it; then tasks 1, 3
    and 4, then the renamer, then 6..9, so that the renamer is queued 5th when the checks need not wait for slots."""
    return 0 if i == CALLER else 1 if i < RENAMER else 2 if i == RENAMER else 3


def tasks_file(path: Path) -> Path:
    blocks = []
    for i in range(1, TASKS + 1):
        line = script(i, CALLER, RENAMER) if not delay(i) else f"sleep {delay(i):g}; {script(i, CALLER, RENAMER)}"
        blocks.append(f'[[tasks]]\nid = "t{i}"\ntitle = "task {i}"\nprompt = {json.dumps(line)}\n')
    path.write_text("\n".join(blocks))
    return path


def config(integration: str) -> str:
    return f'''\
agent = "one-line"

[agents.one-line]
command = ["sh", "-c", {AGENT!r}, "{{prompt}}"]

[checks.suite]
command = [{CHECK!r}]
shell = true
{integration}'''


def make_repository(repo: Path, integration: str) -> Path:
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
    (repo / "docket.toml").write_text(config(integration))
    subprocess.run([str(BIN / "docket"), "init"], cwd=repo, env=environment(), check=True, capture_output=True)
    return repo


@dataclass
class CheckRun:
    """One check run, in seconds from the run's first IntegrationStepQueued: requested, its process launched (once
    it held one of the run's check slots), its result recorded."""
    boundary: str  # its candidate's: integration-<step> (the merge queue's), generation-<n> (a task's)
    requested: float
    launched: float | None = None
    ended: float | None = None
    result: str = "unfinished"  # passed | failed | timed-out | unfinished

    @property
    def integration(self) -> bool:
        return self.boundary.startswith("integration")

    @property
    def seconds(self) -> float | None:
        """From its request to its result (waiting for a slot included)."""
        return None if self.ended is None else self.ended - self.requested

    @property
    def running(self) -> float | None:
        """From its process's launch to its result."""
        return None if self.ended is None or self.launched is None else self.ended - self.launched


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of the spans (start, end) open at one moment."""
    most = now = 0
    for _, step in sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans]):
        now += step
        most = max(most, now)
    return most


@dataclass
class Outcome:
    wall_s: float  # the whole docket go process
    cpu_s: float  # user + system of docket go and every process it waited for
    queue_s: float  # the first IntegrationStepQueued to RunCompleted (or the last event)
    tree: str  # the target's tree at the end
    rejected: list[str]  # the tasks given integration-rejected feedback
    queued: list[str]  # the tasks in the order their steps were queued (a repaired one twice)
    checks: list[CheckRun] = field(default_factory=list)  # every check run of the run, tasks' and the queue's

    @property
    def integration_checks(self) -> list[CheckRun]:
        return [c for c in self.checks if c.integration]

    def position(self) -> int:
        """Where the breaking task's first step was queued (1: first)."""
        return self.queued.index(f"{RUN_ID}.t{RENAMER}") + 1

    def in_flight(self, integration: bool = True) -> int:
        """The most check processes running at one moment (the merge queue's only, or every check's)."""
        return most_at_once([(c.launched, c.ended) for c in (self.integration_checks if integration else self.checks)
                             if c.launched is not None and c.ended is not None])


def at(event: dict) -> float:
    return datetime.fromisoformat(event["recorded_at"].replace("Z", "+00:00")).timestamp()


RESULTS = {"CheckPassed": "passed", "CheckFailed": "failed", "CheckTimedOut": "timed-out"}


def read_run(repo: Path) -> tuple[float, list[str], list[str], list[CheckRun]]:
    """From the run's ledger: its queue's time, the tasks rejected at integration, the queue's order, and every
    check run."""
    from .launch import environment

    events = json.loads(subprocess.run([str(BIN / "docket"), "log", "--json"], cwd=repo, env=environment(),
                                       check=True, capture_output=True, text=True).stdout)["events"]
    kind = [e["type"].split(".")[0] for e in events]
    queued = [e for e, k in zip(events, kind) if k == "IntegrationStepQueued"]
    if not queued:
        raise RuntimeError(f"no IntegrationStepQueued in the ledger of {repo}")
    completed = [e for e, k in zip(events, kind) if k == "RunCompleted"]
    first = at(queued[0])
    queue_s = at((completed or events)[-1]) - first
    rejected = [e["payload"]["task_id"] for e, k in zip(events, kind)
                if k == "TaskFeedbackRecorded" and e["payload"]["code"] == "integration-rejected"]
    boundaries = {e["payload"]["binding_id"]: e["payload"]["boundary"] for e, k in zip(events, kind)
                  if k == "CandidatePinRequested"}
    checks: dict[str, CheckRun] = {}
    for e, k in zip(events, kind):
        p = e["payload"]
        if k == "CheckRequested":
            checks[p["check_id"]] = CheckRun(boundaries.get(p["binding_id"], "?"), at(e) - first)
        elif p.get("check_id") in checks and k == "CheckLaunched":
            checks[p["check_id"]].launched = at(e) - first
        elif p.get("check_id") in checks and k in RESULTS:
            checks[p["check_id"]].ended, checks[p["check_id"]].result = at(e) - first, RESULTS[k]
    return queue_s, rejected, [e["payload"]["task_id"] for e in queued], list(checks.values())


def run_go(folder: Path, tasks_toml: Path, integration: str) -> Outcome:
    """docket go --parallel 9 of the tasks in a fresh repository with this [integration]; what its queue took."""
    repo = make_repository(temp_dir(folder) / "repo", integration)
    argv = [str(BIN / "docket"), "go", "--goal", "bench", "--tasks", str(tasks_toml), "--target", "main",
            "--parallel", str(PARALLEL), "--id", RUN_ID, "--cycles", str(CYCLES)]
    timed = timed_process(argv, repo)
    queue_s, rejected, queued, checks = read_run(repo)
    return Outcome(timed.wall_s, timed.cpu_s, queue_s, git(repo, "rev-parse", "main^{tree}"), rejected, queued,
                   checks)


def measure(folder: Path, rounds: int) -> dict[str, list[Outcome]]:
    """Both sides `rounds` times, taking turns; every run must end with the same target tree, and task RENAMER
    rejected at integration."""
    tasks_toml = tasks_file(folder / "tasks.toml")
    sides: dict[str, list[Outcome]] = {name: [] for name in SIDES}
    for i in range(rounds):
        for name in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
            outcome = run_go(folder, tasks_toml, SIDES[name])
            sides[name].append(outcome)
            log(f"queue: {name} round {i + 1}: queue {outcome.queue_s:.1f} s, go {outcome.wall_s:.1f} s, "
                f"CPU {outcome.cpu_s:.1f} s; queued {' '.join(t.split('.')[-1] for t in outcome.queued)}; "
                f"(the breaking step at {outcome.position()}); rejected {outcome.rejected}; {describe(outcome)}")
    trees = {o.tree for runs in sides.values() for o in runs}
    if len(trees) != 1:
        raise RuntimeError(f"the sides delivered different trees: {sorted(trees)}")
    breaker = f"{RUN_ID}.t{RENAMER}"
    for name, runs in sides.items():
        for o in runs:
            if breaker not in o.rejected:
                raise RuntimeError(f"{name}: {breaker} was not rejected at integration (rejected: {o.rejected})")
    return sides


def describe(o: Outcome) -> str:
    """The merge queue's check runs: how many, each one's start, wait for a slot and run, and the most in flight."""
    def one(c: CheckRun) -> str:
        wait = "?" if c.launched is None else f"{c.launched - c.requested:.1f}"
        run = "?" if c.running is None else f"{c.running:.1f}"
        return f"{c.boundary.removeprefix('integration-')} at {c.requested:.1f} (wait {wait}, run {run}) {c.result}"
    return (f"{len(o.integration_checks)} integration check runs, at most {o.in_flight()} at once (of all "
            f"{len(o.checks)} check runs, at most {o.in_flight(False)}): "
            + ", ".join(one(c) for c in o.integration_checks))


def run(quick: bool) -> list[Row]:
    rounds = 1 if quick else 3
    load_at_start, at_start = load()
    log(f"queue: machine: {at_start}")
    folder = temp_dir()
    try:
        sides = measure(folder, rounds)
    finally:
        remove(folder)
    _, at_end = load()
    q = {name: median([o.queue_s for o in runs]) for name, runs in sides.items()}
    wall = {name: median([o.wall_s for o in runs]) for name, runs in sides.items()}
    cpu = {name: median([o.cpu_s for o in runs]) for name, runs in sides.items()}
    checks = {name: median([len(o.integration_checks) for o in runs]) for name, runs in sides.items()}
    overlap = {name: max(o.in_flight() for o in runs) for name, runs in sides.items()}
    each = {name: median([c.seconds for o in runs for c in o.integration_checks if c.seconds is not None])
            for name, runs in sides.items()}
    running = {name: median([c.running for o in runs for c in o.integration_checks if c.running is not None])
               for name, runs in sides.items()}
    ratio = q["defaults"] / q["serial"]
    log(f"queue: queue time {q['defaults']:.1f} s with the defaults vs {q['serial']:.1f} s serial ({ratio:.2f}x); "
        f"at the start {at_start}, at the end {at_end}")
    what = (f"{TASKS} tasks, 'docket go --parallel {PARALLEL}', a required check of {SLEEP_S} s, task {RENAMER} "
            f"breaks it merged after task {CALLER}")
    return [
        Row("queue", f"merge queue time (first step queued to RunCompleted), {what}; speculate = 1, batch = 1, "
                     f"median of {rounds}", q["serial"], "s"),
        Row("queue", "the same run with the defaults (same final tree, the breaking task rejected in both: checked)",
            q["defaults"], "s", ratio=ratio, goal=f"<= {GOAL}x", passed=ratio <= GOAL),
        Row("queue", f"(information) 'docket go' whole process, defaults vs serial ({wall['serial']:.1f} s)",
            wall["defaults"], "s", ratio=wall["defaults"] / wall["serial"]),
        Row("queue", f"(information) CPU (user + system) of 'docket go' and its children, defaults vs serial "
                     f"({cpu['serial']:.1f} s)", cpu["defaults"], "s", ratio=cpu["defaults"] / cpu["serial"]),
        Row("queue", f"(information) integration check runs, defaults vs serial ({checks['serial']:g}); at most "
                     f"{overlap['defaults']} at once with the defaults, {overlap['serial']} serial; from request to result "
                     f"each took {each['defaults']:.1f} s with the defaults, {each['serial']:.1f} s serial, of which "
                     f"running {running['defaults']:.1f} s and {running['serial']:.1f} s (medians)",
            checks["defaults"], "runs", ratio=checks["defaults"] / checks["serial"]),
        Row("queue", f"(information) the machine: at the start {at_start}; at the end {at_end}", load_at_start,
            "load"),
    ]
