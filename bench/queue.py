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
slots free up in, and where task 5 was queued is logged for each run. Sides, taking turns in one process (the order
reversed every other round): the same run with ``speculate = 1`` and ``batch = 1`` in docket.toml ("serial", the
queue before issue 37), and with neither key ("defaults": ``speculate`` = the run's check slots, ``[run] checks``
unset = the machine's cores, and ``batch = 4``); for information, the same two with ``[run] checks = 4`` ("serial,
checks = 4" and "checks = 4": more slots than cores, which a check that sleeps can use). docket.toml is kept out of
git, so every side's target trees can be compared: they must be equal (checked), and task 5 must have been rejected
at integration in every run (checked). Each run's ledger is kept in bench/.work/queue/<side>-<round>.json.

Figures, medians: the queue's time (from the run's first IntegrationStepQueued to its RunCompleted, from the
ledger), the whole ``docket go`` process's wall and CPU time (user + system of it and every process it waited for).
Goal: the queue's time with the defaults <= 0.5x the serial one. For information: each run's integration check runs
(on ``integration-*`` pins), how long each waited for a slot and ran, and how many ran at once; its verifications
(IntegrationVerificationStarted to its verdict), how many were in flight at once, how many covered more than one
step (batches) and failed and were bisected (IntegrationBatchFailed).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .batch import AGENT, CHECK as SUITE, script
from .common import BIN, WORK, Row, log, median, remove, temp_dir
from .go import git, load, timed_process

TASKS = 9
PARALLEL = 9
CALLER, RENAMER = 2, 5  # the renamer is queued 5th of 9: the middle of the queue
SLEEP_S = 4
CYCLES = 3
GOAL = 0.5
RUN_ID = "queue"
CHECK = f"sleep {SLEEP_S}; {SUITE}"
SERIAL = "[integration]\nspeculate = 1\nbatch = 1\n"
WIDE = "[run]\nchecks = 4\n"  # more check slots than the 2 cores: fair for a check that sleeps
SIDES = {"serial": SERIAL, "defaults": "", "serial, checks = 4": WIDE + "\n" + SERIAL, "checks = 4": WIDE}
KEPT = WORK / "queue"  # each run's ledger (docket log --json), kept for reading: <side>-<round>.json


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


@dataclass
class Verification:
    """One of the merge queue's verifications, in seconds from the run's first IntegrationStepQueued: steps first..last
    (a batch when more than one), from IntegrationVerificationStarted (``speculate`` > 1) to its verdict
    (IntegrationStepVerified / IntegrationStepRejected / IntegrationBatchVerified / IntegrationBatchFailed /
    IntegrationVerificationCancelled, by its verification_binding); with ``speculate = 1`` no start is recorded and
    each of the queue's check runs stands for one (one required check here), from its request to its result."""
    first: int
    last: int
    started: float
    ended: float | None = None
    verdict: str = "unfinished"


VERDICTS = {"IntegrationStepVerified": "verified", "IntegrationBatchVerified": "verified",
            "IntegrationStepRejected": "rejected", "IntegrationBatchFailed": "failed",
            "IntegrationVerificationCancelled": "cancelled"}


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
    verifications: list[Verification] = field(default_factory=list)  # the merge queue's
    bisected: int = 0  # IntegrationBatchFailed: batch verifications that failed, each bisected (its halves' too)

    @property
    def batches(self) -> int:
        """The verifications that covered more than one step."""
        return sum(v.last > v.first for v in self.verifications)

    def verifying(self) -> int:
        """The most of the queue's verifications in flight at one moment (started, no verdict yet)."""
        return most_at_once([(v.started, v.ended) for v in self.verifications if v.ended is not None])

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


def read_run(repo: Path, keep: Path | None = None) -> tuple[float, list[str], list[str], list[CheckRun],
                                                            list[Verification], int]:
    """From the run's ledger (written to keep when given): its queue's time, the tasks rejected at integration, the
    queue's order, every check run, the queue's verifications and its bisected batches."""
    from .launch import environment

    text = subprocess.run([str(BIN / "docket"), "log", "--json"], cwd=repo, env=environment(), check=True,
                          capture_output=True, text=True).stdout
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(text)
    events = json.loads(text)["events"]
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
    verifications: dict[str, Verification] = {}
    for e, k in zip(events, kind):
        p = e["payload"]
        if k == "CheckRequested":
            checks[p["check_id"]] = CheckRun(boundaries.get(p["binding_id"], "?"), at(e) - first)
        elif p.get("check_id") in checks and k == "CheckLaunched":
            checks[p["check_id"]].launched = at(e) - first
        elif p.get("check_id") in checks and k in RESULTS:
            checks[p["check_id"]].ended, checks[p["check_id"]].result = at(e) - first, RESULTS[k]
        if k == "IntegrationVerificationStarted":
            verifications[p["verification_binding"]] = Verification(p["first_step"], p["last_step"], at(e) - first)
        elif k in VERDICTS and p.get("verification_binding") in verifications:
            v = verifications[p["verification_binding"]]
            if v.ended is None:  # the first verdict (a failed batch's rejection may follow its failure)
                v.ended, v.verdict = at(e) - first, VERDICTS[k]
    bisected = kind.count("IntegrationBatchFailed")
    if not verifications:  # speculate = 1: one check run each
        for c in checks.values():
            if c.integration:
                step = int(c.boundary.removeprefix("integration-"))
                verifications[c.boundary + str(c.requested)] = Verification(
                    step, step, c.requested, c.ended, {"passed": "verified"}.get(c.result, c.result))
    return (queue_s, rejected, [e["payload"]["task_id"] for e in queued], list(checks.values()),
            list(verifications.values()), bisected)


def run_go(folder: Path, tasks_toml: Path, integration: str, keep: Path | None = None) -> Outcome:
    """docket go --parallel 9 of the tasks in a fresh repository with these settings; what its queue took."""
    repo = make_repository(temp_dir(folder) / "repo", integration)
    argv = [str(BIN / "docket"), "go", "--goal", "bench", "--tasks", str(tasks_toml), "--target", "main",
            "--parallel", str(PARALLEL), "--id", RUN_ID, "--cycles", str(CYCLES)]
    timed = timed_process(argv, repo)
    queue_s, rejected, queued, checks, verifications, bisected = read_run(repo, keep)
    return Outcome(timed.wall_s, timed.cpu_s, queue_s, git(repo, "rev-parse", "main^{tree}"), rejected, queued,
                   checks, verifications, bisected)


def measure(folder: Path, rounds: int) -> dict[str, list[Outcome]]:
    """Both sides `rounds` times, taking turns; every run must end with the same target tree, and task RENAMER
    rejected at integration."""
    tasks_toml = tasks_file(folder / "tasks.toml")
    sides: dict[str, list[Outcome]] = {name: [] for name in SIDES}
    for i in range(rounds):
        for name in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
            keep = KEPT / f"{name.replace(', ', '-').replace(' = ', '')}-{i + 1}.json"
            outcome = run_go(folder, tasks_toml, SIDES[name], keep)
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
    def span(v: Verification) -> str:
        steps = f"{v.first}" if v.first == v.last else f"{v.first}..{v.last}"
        end = "?" if v.ended is None else f"{v.ended:.1f}"
        return f"{steps} {v.started:.1f}-{end} {v.verdict}"
    return (f"{len(o.integration_checks)} integration check runs, at most {o.in_flight()} at once (of all "
            f"{len(o.checks)} check runs, at most {o.in_flight(False)}): "
            + ", ".join(one(c) for c in o.integration_checks)
            + f"; {len(o.verifications)} verifications, at most {o.verifying()} in flight, {o.batches} of more "
              f"than one step, {o.bisected} failed and bisected: " + ", ".join(span(v) for v in o.verifications))


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
    verifying = {name: max(o.verifying() for o in runs) for name, runs in sides.items()}
    batches = {name: sum(o.batches for o in runs) for name, runs in sides.items()}
    bisected = {name: sum(o.bisected for o in runs) for name, runs in sides.items()}
    each = {name: median([c.seconds for o in runs for c in o.integration_checks if c.seconds is not None])
            for name, runs in sides.items()}
    running = {name: median([c.running for o in runs for c in o.integration_checks if c.running is not None])
               for name, runs in sides.items()}
    ratio = q["defaults"] / q["serial"]
    log(f"queue: queue time {q['defaults']:.1f} s with the defaults vs {q['serial']:.1f} s serial ({ratio:.2f}x); "
        f"with [run] checks = 4 {q['checks = 4']:.1f} s vs {q['serial, checks = 4']:.1f} s serial; "
        f"at the start {at_start}, at the end {at_end}; ledgers in {KEPT}")
    for name in sides:
        log(f"queue: {name}: queue {' '.join(f'{o.queue_s:.1f}' for o in sides[name])} s; "
            f"queue check runs {' '.join(str(len(o.integration_checks)) for o in sides[name])}; "
            f"verifications in flight at most {' '.join(str(o.verifying()) for o in sides[name])}; "
            f"batches {' '.join(str(o.batches) for o in sides[name])}; "
            f"failed and bisected {' '.join(str(o.bisected) for o in sides[name])}")
    what = (f"{TASKS} tasks, 'docket go --parallel {PARALLEL}', a required check of {SLEEP_S} s, task {RENAMER} "
            f"breaks it merged after task {CALLER}")

    def counts(name: str) -> str:
        return (f"{checks[name]:g} queue check runs (median), at most {verifying[name]} verifications in flight and "
                f"{overlap[name]} queue checks running at once; in {rounds} runs {batches[name]} batches, "
                f"{bisected[name]} failed and bisected")

    wide, wide_serial = q["checks = 4"], q["serial, checks = 4"]
    return [
        Row("queue", f"merge queue time (first step queued to RunCompleted), {what}; speculate = 1, batch = 1, "
                     f"median of {rounds}; {counts('serial')}", q["serial"], "s"),
        Row("queue", f"the same run with the defaults (same final tree, the breaking task rejected in every run: "
                     f"checked); {counts('defaults')}", q["defaults"], "s", ratio=ratio, goal=f"<= {GOAL}x",
            passed=ratio <= GOAL),
        Row("queue", f"(information) 'docket go' whole process, defaults vs serial ({wall['serial']:.1f} s)",
            wall["defaults"], "s", ratio=wall["defaults"] / wall["serial"]),
        Row("queue", f"(information) CPU (user + system) of 'docket go' and its children, defaults vs serial "
                     f"({cpu['serial']:.1f} s)", cpu["defaults"], "s", ratio=cpu["defaults"] / cpu["serial"]),
        Row("queue", f"(information) the queue's check runs from request to result, medians: {each['defaults']:.1f} s "
                     f"with the defaults, {each['serial']:.1f} s serial, of which running {running['defaults']:.1f} s "
                     f"and {running['serial']:.1f} s; queue check runs, defaults vs serial ({checks['serial']:g})",
            checks["defaults"], "runs", ratio=checks["defaults"] / checks["serial"]),
        Row("queue", f"(information, not the goal's settings) [run] checks = 4 and speculate = 1, batch = 1: queue "
                     f"time; {counts('serial, checks = 4')}; go {wall['serial, checks = 4']:.1f} s, CPU "
                     f"{cpu['serial, checks = 4']:.1f} s", wide_serial, "s", ratio=wide_serial / q["serial"]),
        Row("queue", f"(information, not the goal's settings) [run] checks = 4 (so speculate = 4, batch = 4): queue "
                     f"time vs speculate = 1 at 4 slots ({wide / wide_serial:.2f}x); {counts('checks = 4')}; go "
                     f"{wall['checks = 4']:.1f} s, CPU {cpu['checks = 4']:.1f} s; ratio: vs the serial side",
            wide, "s", ratio=wide / q["serial"]),
        Row("queue", f"(information) the machine: at the start {at_start}; at the end {at_end}", load_at_start,
            "load"),
    ]
