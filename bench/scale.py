"""scale: docket go's per-task cost as runs grow, and a thousand tasks at once.

Every run is ``docket go`` of N trivial tasks in a fresh tiny repository (bench/go.py's: a README, docket.toml, the
one-line ``sh`` agent writing one file per task, the check ``true``), made before the clock starts.

Flatness (issue 22, goal 1). While docket go runs, its CPU time (user + system, its own and that of every process
it waited for: agents, checks) is sampled from /proc every 50 ms. The tasks' TaskFinished times, read from its
ledger afterwards, cut the run into tenths: the first tenth's per-task CPU is the CPU from the first task's
finish to the (1 + k)th task's finish over k = (N - 1) // 10 (what the first task pays once, a lazy import, the
merge queue's opening, is not a per-task cost); the last tenth's, from the (N - k)th finish to the last, over k. Goal: the
last within 1.2x of the first, at N = 10, 100 and 1,000 (``--parallel 1``; the 1,000 figure comes from goal 5's
``--parallel 8`` run, labelled so). A per-task cost that grows with the run (a fold of every task's events, a scan
of the whole ledger per event) shows as a ratio above 1.

A thousand tasks (goal 5). ``docket go`` of 1,000 tasks at ``--parallel 8`` (200 with ``--quick``) must finish;
its peak RSS (VmHWM of the docket go process, sampled) under 300 MB; ``docket status RUN`` run as a whole process
every 2 s during it, each under 200 ms (median and worst reported, the goal on the median); ``docket watch RUN``
(piped: a line per event) started once the run exists must keep up: for each line it prints, its lag is the time
it was read minus the event's recorded time; the goal is a last-tenth median lag within 1 s of the first tenth's
(the watch polls every 0.5 s, so a lag of about that is its design, not falling behind) and every event of the run
printed by the end. The ledger's growth must be linear: its bytes and events per task at N within 1.2x of those
at the smaller run's N. Files left under the docket folder after the run are counted (a file per task that never
goes would show), for information.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .common import BIN, Row, log, median, remove, temp_dir
from .go import ONE_LINE_CONFIG, load, make_repository, tasks_file
from .launch import environment

FLAT_GOAL = 1.2
RSS_GOAL_MB = 300
STATUS_GOAL_S = 0.2
WATCH_GOAL_S = 1.0
GROWTH_GOAL = 1.2
SAMPLE_S = 0.05
STATUS_EVERY_S = 2.0
RUN_ID = "scale"
TICK = os.sysconf("SC_CLK_TCK")


def _stamp(recorded_at: str) -> float:
    return datetime.fromisoformat(recorded_at.replace("Z", "+00:00")).timestamp()


@dataclass
class ScaleRun:
    tasks: int
    parallel: int
    wall_s: float = 0.0
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (time, CPU seconds so far)
    peak_rss_mb: float = 0.0
    planned_at: float = 0.0
    finished_at: list[float] = field(default_factory=list)  # each task's TaskFinished time, in order
    status_s: list[float] = field(default_factory=list)
    status_cpu_s: list[float] = field(default_factory=list)  # user + system of each docket status process
    watch_lag: list[tuple[float, float]] = field(default_factory=list)  # (event's recorded time, lag in s)
    watch_last: int = 0  # the last position docket watch printed
    run_positions: int = 0  # events of the run in the ledger (what watch should print)
    ledger_bytes: int = 0
    events: int = 0
    docket_files: int = 0
    outcome: str = ""  # the run's status at the end

    def cpu_at(self, at: float) -> float:
        """CPU seconds at a moment, interpolated between samples."""
        before = [s for s in self.cpu if s[0] <= at]
        after = [s for s in self.cpu if s[0] >= at]
        if not before:
            return self.cpu[0][1]
        if not after:
            return self.cpu[-1][1]
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (at - t0) / (t1 - t0)

    def tenths(self) -> tuple[float, float]:
        """Per-task CPU seconds of the first and the last tenth of the tasks, the first task's finish on (what the
        first task pays once, a lazy import, the merge queue's opening, is not a per-task cost)."""
        k = max(1, (self.tasks - 1) // 10)
        done = sorted(self.finished_at)
        first = (self.cpu_at(done[k]) - self.cpu_at(done[0])) / k
        last = (self.cpu_at(done[-1]) - self.cpu_at(done[-1 - k])) / k
        return first, last

    def watch_tenths(self) -> tuple[float, float]:
        """Median lag of docket watch over the events of the first and the last tenth of the run's time."""
        if not self.watch_lag:
            return float("nan"), float("nan")
        start, end = self.watch_lag[0][0], self.watch_lag[-1][0]
        tenth = (end - start) / 10
        first = [lag for at, lag in self.watch_lag if at <= start + tenth] or [self.watch_lag[0][1]]
        last = [lag for at, lag in self.watch_lag if at >= end - tenth] or [self.watch_lag[-1][1]]
        return median(first), median(last)


def _proc(pid: int) -> tuple[float, float] | None:
    """(CPU seconds of pid and its waited-for children, VmHWM in MB), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    cpu = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    hwm = next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0.0)
    return cpu, hwm


def _docket(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "docket"), *args], cwd=repo, env=environment(), check=check,
                          capture_output=True, text=True)


def _watch_lines(process: subprocess.Popen[str], out: ScaleRun) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        read = time.time()
        parts = line.split(" ", 3)
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        out.watch_last = int(parts[0])
        out.watch_lag.append((_stamp(parts[1]), read - _stamp(parts[1])))


def scale_run(folder: Path, tasks: int, parallel: int, *, probe: bool, status_every_s: float = STATUS_EVERY_S
              ) -> ScaleRun:
    """docket go of `tasks` one-line tasks at --parallel `parallel` in a fresh tiny repository; with probe, docket
    status every status_every_s and docket watch beside it (started once the run exists)."""
    where = temp_dir(folder)
    repo = make_repository(where / "repo", ONE_LINE_CONFIG, with_ledger=True)
    tasks_toml = tasks_file(where / "tasks.toml", tasks)
    out = ScaleRun(tasks, parallel)
    argv = [str(BIN / "docket"), "go", "--goal", "scale", "--tasks", str(tasks_toml), "--target", "main",
            "--parallel", str(parallel), "--id", RUN_ID]
    t0 = time.perf_counter()
    go = subprocess.Popen(argv, cwd=repo, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    watcher: subprocess.Popen[str] | None = None
    reader: threading.Thread | None = None
    next_status = time.time() + status_every_s
    try:
        while go.poll() is None:
            sample = _proc(go.pid)
            if sample is not None:
                out.cpu.append((time.time(), sample[0]))
                out.peak_rss_mb = max(out.peak_rss_mb, sample[1])
            if probe and time.time() >= next_status:
                s0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                status = _docket(repo, "status", RUN_ID, check=False)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # only status was waited for meanwhile
                if status.returncode == 0:
                    out.status_s.append(time.perf_counter() - s0)
                    out.status_cpu_s.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
                    if watcher is None:
                        watcher = subprocess.Popen([str(BIN / "docket"), "watch", RUN_ID], cwd=repo,
                                                   env=environment(), stdout=subprocess.PIPE,
                                                   stderr=subprocess.DEVNULL, text=True)
                        reader = threading.Thread(target=_watch_lines, args=(watcher, out), daemon=True)
                        reader.start()
                next_status = time.time() + status_every_s
            time.sleep(SAMPLE_S)
        out.wall_s = time.perf_counter() - t0
        stderr = go.stderr.read() if go.stderr else ""
        if go.returncode != 0:
            raise RuntimeError(f"docket go of {tasks} tasks exited {go.returncode}: {stderr[-2000:]}")
        if watcher is not None:
            try:
                watcher.wait(timeout=30)  # it ends once the run has closed
            except subprocess.TimeoutExpired:
                watcher.kill()
                watcher.wait()
            if reader is not None:
                reader.join(timeout=10)
    finally:
        for process in (go, watcher):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    events = json.loads(_docket(repo, "log", "--json").stdout)["events"]
    out.events = len(events)
    for event in events:
        name = event["type"].split(".")[0]
        if name == "RunPlanned" and not out.planned_at:
            out.planned_at = _stamp(event["recorded_at"])
        elif name == "TaskFinished":
            out.finished_at.append(_stamp(event["recorded_at"]))
    out.run_positions = max((e["position"] for e in events), default=0)
    docket_dir = repo / ".git" / "docket"
    with sqlite3.connect(docket_dir / "ledger.sqlite") as conn:  # what the WAL holds goes into the file first
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    out.ledger_bytes = (docket_dir / "ledger.sqlite").stat().st_size
    out.docket_files = sum(1 for p in docket_dir.rglob("*") if p.is_file())
    out.outcome = json.loads(_docket(repo, "status", RUN_ID, "--json").stdout)["run"]["status"]
    remove(where)
    if len(out.finished_at) != tasks:
        raise RuntimeError(f"{len(out.finished_at)} of {tasks} tasks finished")
    return out


def run(quick: bool) -> list[Row]:
    flat_sizes = (10, 50) if quick else (10, 100)
    big = 200 if quick else 1000
    load_at_start, at_start = load()
    log(f"machine: {at_start}")
    folder = temp_dir()
    try:
        serial = [scale_run(folder, n, 1, probe=False) for n in flat_sizes]
        thousand = scale_run(folder, big, 8, probe=True)
    finally:
        remove(folder)
    _, at_end = load()
    rows = []
    for r in [*serial, thousand]:
        first, last = r.tenths()
        rows.append(Row("scale", f"per-task CPU of docket go, N = {r.tasks}, --parallel {r.parallel}: last tenth "
                                 f"{last * 1000:.0f} ms vs first tenth {first * 1000:.0f} ms", last, "s",
                        ratio=last / first, goal=f"<= {FLAT_GOAL}x", passed=last / first <= FLAT_GOAL))
    t = thousand
    log(f"scale: {t.tasks} tasks at --parallel 8 in {t.wall_s:.0f} s, peak RSS {t.peak_rss_mb:.0f} MB, "
        f"{t.events} events, {t.ledger_bytes / 1e6:.1f} MB of ledger, {t.docket_files} files under the docket folder")
    status_median = median(t.status_s) if t.status_s else float("nan")
    watch_first, watch_last = t.watch_tenths()
    base = serial[-1]
    bytes_ratio = (t.ledger_bytes / t.tasks) / (base.ledger_bytes / base.tasks)
    events_ratio = (t.events / t.tasks) / (base.events / base.tasks)
    rows += [
        Row("scale", f"docket go of {t.tasks} tasks at --parallel 8 finished ({t.outcome}), wall", t.wall_s, "s",
            goal="finishes", passed=t.outcome == "completed"),
        Row("scale", "  its peak RSS (VmHWM)", t.peak_rss_mb, "MB", goal=f"< {RSS_GOAL_MB} MB",
            passed=t.peak_rss_mb < RSS_GOAL_MB),
        Row("scale", f"  'docket status RUN' during it, whole process, median of {len(t.status_s)} (worst "
                     f"{max(t.status_s, default=0) * 1000:.0f} ms)", status_median, "s",
            goal=f"< {STATUS_GOAL_S * 1000:.0f} ms", passed=status_median < STATUS_GOAL_S),
        Row("scale", f"  (information) its CPU (user + system), median (worst "
                     f"{max(t.status_cpu_s, default=0) * 1000:.0f} ms): on a loaded machine the wall time is this "
                     "times the load", median(t.status_cpu_s) if t.status_cpu_s else float("nan"), "s"),
        Row("scale", f"  'docket watch RUN' lag, last tenth's median (first tenth's {watch_first:.2f} s; printed up "
                     f"to position {t.watch_last} of {t.run_positions})", watch_last, "s",
            goal=f"< first + {WATCH_GOAL_S:.0f} s, all printed",
            passed=watch_last < watch_first + WATCH_GOAL_S and t.watch_last == t.run_positions),
        Row("scale", f"  ledger bytes per task ({t.ledger_bytes / t.tasks / 1000:.1f} kB) vs N = {base.tasks}'s "
                     f"({base.ledger_bytes / base.tasks / 1000:.1f} kB)", bytes_ratio, "x",
            goal=f"<= {GROWTH_GOAL}x", passed=bytes_ratio <= GROWTH_GOAL),
        Row("scale", f"  ledger events per task ({t.events / t.tasks:.1f}) vs N = {base.tasks}'s "
                     f"({base.events / base.tasks:.1f})", events_ratio, "x",
            goal=f"<= {GROWTH_GOAL}x", passed=events_ratio <= GROWTH_GOAL),
        Row("scale", f"(information) files under the docket folder after the run: {t.docket_files} at N = {t.tasks}, "
                     f"{base.docket_files} at N = {base.tasks}", t.docket_files / t.tasks, "per task"),
        Row("scale", f"(information) the machine: at the start {at_start}; at the end {at_end}", load_at_start,
            "load"),
    ]
    return rows
