"""launch: starting an agent with 'docket worker launch' against a plain Popen; the CPU of supervising 4 agents.

Launch overhead. In a fresh git repository holding a ledger, a run and a task
whose worktree was made by a first, untimed launch (so no round pays for
``git worktree add``), each round relaunches the task's agent with
``docket worker launch r1 --task t1 -- sh -c 'date +%s%N > "$0"' STAMP`` as a
whole process, interleaved with a plain ``subprocess.Popen`` of the same
``sh -c ...`` command. Both sides are timed the same way: CLOCK_REALTIME in
nanoseconds just before the Popen, against the one the agent writes as its
first instruction. The figure is the difference of the medians (the time docket
adds) and their ratio. Goal: under 100 ms added. Every process may cache
bytecode (in bench/.work/pycache), as in bench/startup.py.

Where the added time goes (information): a bare Python writing the same stamp
as its first statement (the interpreter's start, which any Python launcher
pays; interleaved with the two above); the time a fresh process takes to import
what ``docket worker launch`` imports before it starts the agent; and the same
relaunch driven in this process by the use case ``launch_worker`` (worker
relaunched, lease granted, launch intent, the effector starting the agent held
at its gate, its identity recorded, the gate opened), split into the ledger's
decisions (each a durable commit), the scan of every process's environment for
the launch's mark (``find_marked``) and the spawn of the held agent. The rest
is parsing, docket.toml and the context.

Supervision cost. One process launches 4 agents with ``launch_worker`` and
supervises them together with ``supervise`` (as ``docket go`` will, rather than
4 ``docket worker launch`` processes). Each agent prints a line a second for
60 s (10 s in quick mode). The figure is this process's CPU time (user +
system, all its threads, children excluded: ``getrusage(RUSAGE_SELF)``) from
the start of ``supervise`` to its return, over that wall time: the share of
one core. Goal: under 2 %.
"""

from __future__ import annotations

import importlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import BIN, WORK, Row, log, median, remove, temp_dir

ADDED_GOAL_MS = 100.0
CPU_GOAL_PERCENT = 2.0
AGENT = ["sh", "-c", 'date +%s%N > "$0"; exit 0']  # then the stamp file's path, as $0
PYTHON_AGENT = [sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').write(str(time.time_ns()))"]
TICKER = 'i=0; while [ "$i" -lt "$0" ]; do echo "tick $i"; sleep 1; i=$((i + 1)); done'
# What 'docket worker launch' imports before the agent starts (timed in a fresh process, for information).
LAUNCH_IMPORTS = ("import docket.cli.app, docket.cli.steps.worker, docket.cli.steps.agents, docket.adapters.service_layer.use_cases.workers, "
                  "docket.adapters.service_layer.use_cases.supervisor, docket.adapters.service_layer.kernel.effector, docket.adapters.world.processes.lifecycle, "
                  "docket.adapters.world.files.config_file")
# The parts of launch_worker timed for information: (label, module, class, method).
PHASES = (("ledger decisions", "docket.adapters.service_layer.kernel.ledger", "Ledger", "decide"),
          ("process scan", "docket.adapters.world.processes.lifecycle", "PsutilProcesses", "find_marked"),
          ("spawn", "docket.adapters.world.processes.lifecycle", "PsutilProcesses", "spawn_gated"))


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(WORK / "pycache"), GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    return env


def docket(folder: Path, *args: str) -> None:
    subprocess.run([str(BIN / "docket"), *args], cwd=folder, env=environment(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def prepare(folder: Path, tasks: list[str]) -> None:
    """A git repository with a ledger, run r1 and the given tasks planned (no worktree made yet)."""
    env = environment()
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "start"], cwd=folder, env=env, check=True)
    docket(folder, "init")
    # the agent writes its stamp beside the repository, outside any sandbox's write roots: the launch path is
    # measured here without the sandbox, whose own cost bench/sandbox.py measures
    config = folder / "docket.toml"
    config.write_text('sandbox = "off"\n' + (config.read_text() if config.exists() else ""))
    docket(folder, "run", "open", "--target", "main", "--goal", "bench", "--id", "r1")
    for task in tasks:
        docket(folder, "task", "plan", "r1", "--title", f"task {task}", "--id", task)


def _first_instruction(argv: list[str], stamp: Path, cwd: Path) -> tuple[float, float]:
    """(ms from just before the Popen to the agent's first instruction, ms until the process ended)."""
    stamp.unlink(missing_ok=True)
    env = environment()
    t0 = time.time_ns()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ended = time.time_ns()
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    return (int(stamp.read_text()) - t0) / 1e6, (ended - t0) / 1e6


@dataclass
class LaunchFigures:
    docket_ms: list[float]   # docket worker launch: Popen to the agent's first instruction
    popen_ms: list[float]    # a plain Popen of the agent
    python_ms: list[float]   # a bare Python writing the stamp as its first statement
    whole_ms: list[float]    # docket worker launch: Popen to its exit (the agent ends at once)
    in_process_ms: list[float]  # launch_worker in this process: call to the agent's first instruction
    imports_ms: float        # a fresh process importing what worker launch imports, import time only
    phases_ms: dict[str, list[float]] = field(default_factory=dict)  # of in_process_ms, per PHASES label
    decisions: int = 0       # Ledger.decide calls (write transactions) in one in-process launch


def measure_launch(folder: Path, rounds: int) -> LaunchFigures:
    """Interleaved rounds of docket worker launch (relaunches of t1) and a plain Popen of the same agent."""
    stamp = folder / "stamp"
    launch = [str(BIN / "docket"), "worker", "launch", "r1", "--task", "t1", "--", *AGENT, str(stamp)]
    plain = [*AGENT, str(stamp)]
    python = [*PYTHON_AGENT, str(stamp)]
    for _ in range(2):  # untimed: the worktree is made, files in the page cache, bytecode cached
        _first_instruction(launch, stamp, folder)
    _first_instruction(plain, stamp, folder)
    _first_instruction(python, stamp, folder)
    figures = LaunchFigures([], [], [], [], [], 0.0)
    sides = {"docket": (launch, figures.docket_ms), "popen": (plain, figures.popen_ms),
             "python": (python, figures.python_ms)}
    for i in range(rounds):  # interleaved, the order reversed every other round
        for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            argv, times = sides[side]
            first, whole = _first_instruction(argv, stamp, folder)
            times.append(first)
            if side == "docket":
                figures.whole_ms.append(whole)
    _in_process(folder, max(1, rounds // 2), stamp, figures)
    code = f"import time; t0 = time.perf_counter(); {LAUNCH_IMPORTS}; print(time.perf_counter() - t0)"
    figures.imports_ms = median([float(subprocess.run([sys.executable, "-c", code], env=environment(), check=True,
                                                      capture_output=True, text=True).stdout) * 1000
                                 for _ in range(min(3, rounds))])
    return figures


def _open(folder: Path) -> tuple[Any, Any, Any, Path]:
    """The ledger of the repository in folder, a system clock and an effector with the real ports."""
    from docket.adapters.service_layer.kernel.effector import Effector
    from docket.adapters.service_layer.kernel.ledger import Ledger
    from docket.adapters.world.clock import SystemClock

    repository = folder / ".git"
    ledger = Ledger(repository / "docket" / "ledger.sqlite")
    clock = SystemClock()
    return ledger, clock, Effector(ledger, clock), repository


def _launch(ledger: Any, clock: Any, effector: Any, repository: Path, task: str, command: list[str]) -> Any:
    from docket.adapters.service_layer.use_cases.workers import LaunchRequest, launch_worker
    from docket.domain.containment.sandbox import Confinement

    request = LaunchRequest(run_id="r1", task_id=task, worker_id=task, agent="command",
                            command=[arg.replace("{", "{{").replace("}", "}}") for arg in command],
                            confinement=Confinement(mode="off"))  # as docket.toml says here (prepare)
    return launch_worker(ledger, clock, effector, effector.ports.launcher, request, docket_dir=repository / "docket",
                         repository=repository, main_checkout=repository.parent,
                         ledger_path=repository / "docket" / "ledger.sqlite")


def _in_process(folder: Path, rounds: int, stamp: Path, figures: LaunchFigures) -> None:
    """launch_worker for a relaunch of t1 in this process (imports done, ledger open): call to first instruction."""
    from docket.adapters.service_layer.use_cases.supervisor import Limits, supervise

    ledger, clock, effector, repository = _open(folder)
    figures.phases_ms = {label: [] for label, *_ in PHASES}
    try:
        for i in range(rounds + 1):
            stamp.unlink(missing_ok=True)
            spent: dict[str, list[float]] = {label: [] for label, *_ in PHASES}
            with _phase_timers(spent):
                t0 = time.time_ns()
                launched = _launch(ledger, clock, effector, repository, "t1", [*AGENT, str(stamp)])
            supervise(ledger, clock, effector, [(launched, Limits())])
            if i:  # the first round warms this process's caches
                figures.in_process_ms.append((int(stamp.read_text()) - t0) / 1e6)
                for label, times in spent.items():
                    figures.phases_ms[label].append(sum(times) * 1000)
                figures.decisions = len(spent["ledger decisions"])
    finally:
        ledger.close()


@contextmanager
def _phase_timers(spent: dict[str, list[float]]) -> Iterator[None]:
    """Time each call of the PHASES methods (seconds appended to spent[label]) while the block runs."""
    patched = []
    for label, module, cls, method in PHASES:
        owner = getattr(importlib.import_module(module), cls)
        original = owner.__dict__[method]

        def timed(*args: Any, _original: Any = original, _label: str = label, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label].append(time.perf_counter() - t0)

        setattr(owner, method, timed)
        patched.append((owner, method, original))
    try:
        yield
    finally:
        for owner, method, original in patched:
            setattr(owner, method, original)


@dataclass
class SupervisionFigures:
    agents: int
    wall_s: float   # supervise(...) from its call to its return
    cpu_s: float    # this process's user + system time meanwhile

    @property
    def percent(self) -> float:
        return 100 * self.cpu_s / self.wall_s


def measure_supervision(folder: Path, tasks: list[str], seconds: int) -> SupervisionFigures:
    """Launch one agent per task (each prints a line a second for `seconds` s), supervise them all in this process."""
    from docket.adapters.service_layer.use_cases.supervisor import Limits, supervise

    ledger, clock, effector, repository = _open(folder)
    try:
        launched = [_launch(ledger, clock, effector, repository, task, ["sh", "-c", TICKER, str(seconds)])
                    for task in tasks]
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        ended = supervise(ledger, clock, effector, [(w, Limits()) for w in launched])
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        ledger.close()
    if sorted(e.result for e in ended) != ["ok"] * len(tasks):
        raise RuntimeError(f"an agent did not end well: {ended}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return SupervisionFigures(len(tasks), wall, cpu)


def run(quick: bool) -> list[Row]:
    rounds = 7 if quick else 21
    seconds = 10 if quick else 60
    agents = [f"s{i}" for i in range(1, 5)]
    folder = temp_dir()
    try:
        prepare(folder, ["t1", *agents])
        launch = measure_launch(folder, rounds)
        supervision = measure_supervision(folder, agents, seconds)
    finally:
        remove(folder)
    d, p, py = median(launch.docket_ms), median(launch.popen_ms), median(launch.python_ms)
    added = d - p
    in_process, whole = median(launch.in_process_ms), median(launch.whole_ms)
    phases = {label: median(times) for label, times in launch.phases_ms.items()}
    log(f"launch: docket {d:.1f} ms, Popen {p:.1f} ms to the first instruction ({added:.1f} ms added); bare python "
        f"{py:.1f} ms; imports {launch.imports_ms:.1f} ms; launch_worker in process {in_process:.1f} ms ("
        + ", ".join(f"{label} {ms:.1f} ms" for label, ms in phases.items())
        + f"); supervising {supervision.agents} agents: {supervision.percent:.2f} % of a core "
        f"({supervision.cpu_s:.2f} s CPU in {supervision.wall_s:.1f} s)")
    return [
        Row("launch", f"plain Popen of the agent to its first instruction, median of {rounds}", p / 1000, "s"),
        Row("launch", f"'docket worker launch' (a relaunch) to the agent's first instruction, median of {rounds}",
            d / 1000, "s", ratio=d / p),
        Row("launch", "time docket adds before the agent's first instruction (difference of the medians)",
            added / 1000, "s", goal=f"< {ADDED_GOAL_MS:.0f} ms", passed=added < ADDED_GOAL_MS),
        Row("launch", "(information) a bare Python to its first statement: the floor of a launcher in Python",
            py / 1000, "s", ratio=py / p),
        Row("launch", "(information) importing what 'worker launch' imports, in a fresh process",
            launch.imports_ms / 1000, "s"),
        Row("launch", f"(information) launch_worker in one process, median of {len(launch.in_process_ms)}",
            in_process / 1000, "s"),
        *[Row("launch", f"(information) of which {label}" + (f" ({launch.decisions} write transactions)"
                                                            if label == "ledger decisions" else ""), ms / 1000, "s")
          for label, ms in phases.items()],
        Row("launch", "(information) 'docket worker launch' whole process, the agent exiting at once",
            whole / 1000, "s"),
        Row("launch", f"CPU of one process supervising {supervision.agents} agents for {seconds} s, "
                      f"share of one core ({supervision.cpu_s:.2f} s in {supervision.wall_s:.1f} s)",
            supervision.percent, "%", goal=f"< {CPU_GOAL_PERCENT:.0f} %",
            passed=supervision.percent < CPU_GOAL_PERCENT),
    ]
