"""Shared helpers: timing, synthetic docket events, cached ledgers, result rows."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from docket.domain import events as ev
from docket.domain.kernel import streams
from docket.domain.kernel.values import from_ms, to_ms

from docket.adapters.world.ledger.ledger_rows import read_chain_rows, read_only

WORK = Path(__file__).resolve().parent / ".work"
BIN = Path(sys.executable).parent
BASE_MS = to_ms("2026-01-01T00:00:00.000Z")
STEP_MS = 250  # synthetic events are recorded 250 ms apart


# Timing ---------------------------------------------------------------------

def median(xs: list[float]) -> float:
    return statistics.median(xs)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(runs: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Wall times of each of runs, `rounds` times, taking turns (the order reversed every other
    round), so that a slow moment of a shared machine hits every side of a comparison alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(rounds):
        for name in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
            times[name].append(timed(runs[name]))
    return times


def spread(xs: list[float], unit: str = "s") -> str:
    """'min-max' of xs, for a figure's description."""
    return f"{fmt(min(xs), unit)}-{fmt(max(xs), unit)}"


def run_process(argv: list[str]) -> float:
    """Wall time of one whole process, which must succeed."""
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0



def children_cpu() -> float:
    """The CPU time (user + system) of every child process waited for so far, this process's whole tree of them."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_process(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time (user + system) of one whole process (and what it started)."""
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0, children_cpu() - c0

def temp_dir(under: Path = WORK) -> Path:
    """A fresh folder under bench/.work (same disk as a real ledger), or under `under`."""
    under.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="docket-bench-", dir=under))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def log(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


# Synthetic docket events ------------------------------------------------------

def stamp(i: int) -> str:
    return from_ms(BASE_MS + i * STEP_MS)


def make(cls: type[ev.Event], stream: str, version: int, at: str, **payload: Any) -> ev.Event:
    """An event of cls; payload keys the model does not declare (e.g. run_id on
    older lease events) are dropped, so the generator follows the catalogue."""
    fields = cls.model_fields
    return cls(stream=stream, version=version, recorded_at=at,
               **{k: v for k, v in payload.items() if k in fields})


def schema_tag() -> str:
    """Changes when any event's fields change: cached ledgers are then rebuilt."""
    spec = sorted((name, sorted(cls.model_fields)) for name, cls in ev.EVENT_TYPES.items())
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:8]


def lease_events(count: int, resources: int = 50, start: int = 0) -> list[ev.Event]:
    """count lease events over `resources` resources: a LeaseGranted (version 1) per
    resource, then LeaseRenewed (versions 2, 3 ...) round robin. ``start`` skips
    the first `start` events, so consecutive calls continue the same streams."""
    out: list[ev.Event] = []
    for i in range(start, start + count):
        k, version = i % resources, i // resources + 1
        resource = f"wt/{k}"
        at = stamp(i)
        if version == 1:
            out.append(make(
                ev.LeaseGranted, streams.lease_stream(resource), 1, at, resource=resource, run_id="run-bench",
                worker_id=f"worker-{k}", generation=1, ttl_ms=600_000,
                expires_at=from_ms(BASE_MS + i * STEP_MS + 600_000), supersedes_token=None))
        else:
            out.append(make(
                ev.LeaseRenewed, streams.lease_stream(resource), version, at, resource=resource, run_id="run-bench",
                token=2 + k, expires_at=from_ms(BASE_MS + i * STEP_MS + 600_000)))
    return out


def mixed_events(count: int, first_position: int = 2, per_run: int = 5000) -> Iterator[ev.Event]:
    """A realistic mix: runs opened and base-pinned, tasks planned, workers
    registered, leases granted, renewed (most events), released and re-granted,
    workers relaunched, runs completed. Yields exactly `count` events meant to
    land at positions first_position, first_position + 1, ...
    """
    position = first_position
    made = 0

    def emit(cls: type[ev.Event], stream: str, version: int, **payload: Any) -> ev.Event:
        nonlocal position, made
        event = make(cls, stream, version, stamp(position), **payload)
        position += 1
        made += 1
        return event

    r = 0
    while True:
        run_id = f"run-{r:05d}"
        run_stream = streams.run_stream(run_id)
        run_made = 0
        plan = [
            (ev.RunOpened, run_stream, 1, dict(run_id=run_id, goal=f"benchmark goal {r}",
                                               target_branch="main", budget_ms=7_200_000)),
            (ev.RunBasePinRequested, run_stream, 2, dict(intent_id=f"intent-{r:05d}", run_id=run_id,
                                                         target_branch="main", repository="/srv/repo")),
            (ev.RunBasePinned, run_stream, 3, dict(intent_id=f"intent-{r:05d}", run_id=run_id,
                                                   commit=hashlib.sha1(run_id.encode()).hexdigest(),
                                                   result="observed")),
        ]
        workers = [f"worker-{r:05d}-{w}" for w in range(4)]
        for w, worker_id in enumerate(workers):
            task_id = f"task-{r:05d}-{w}"
            plan.append((ev.TaskPlanned, streams.task_stream(task_id), 1,
                         dict(task_id=task_id, run_id=run_id, title=f"task {w} of run {r}")))
            plan.append((ev.WorkerRegistered, streams.worker_stream(worker_id), 1,
                         dict(worker_id=worker_id, run_id=run_id, role="coder", generation=1, task_id=task_id)))
        for cls, stream, version, payload in plan:
            if made == count:
                return
            yield emit(cls, stream, version, **payload)
            run_made += 1
        # Leases: one per worker; renewals round robin, a release + re-grant
        # (after a relaunch) every 1,000 events.
        versions = [0] * 4
        tokens = [0] * 4
        generations = [1] * 4
        while run_made < per_run - 1:
            if made == count:
                return
            w = run_made % 4
            resource = f"wt/{r:05d}/{w}"
            stream = streams.lease_stream(resource)
            at_ms = BASE_MS + position * STEP_MS
            if tokens[w] and run_made % 1000 == w:
                versions[w] += 1
                yield emit(ev.LeaseReleased, stream, versions[w], resource=resource, run_id=run_id,
                           token=tokens[w])
                tokens[w] = 0
            elif tokens[w] and run_made % 1000 == 500 + w:
                generations[w] += 1
                yield emit(ev.WorkerRelaunched, streams.worker_stream(workers[w]), generations[w],
                           worker_id=workers[w], run_id=run_id, generation=generations[w],
                           fenced_generation=generations[w] - 1)
            elif not tokens[w]:
                versions[w] += 1
                tokens[w] = position
                yield emit(ev.LeaseGranted, stream, versions[w], resource=resource, run_id=run_id,
                           worker_id=workers[w], generation=generations[w], ttl_ms=600_000,
                           expires_at=from_ms(at_ms + 600_000), supersedes_token=None)
            else:
                versions[w] += 1
                yield emit(ev.LeaseRenewed, stream, versions[w], resource=resource, run_id=run_id, token=tokens[w],
                           expires_at=from_ms(at_ms + 600_000))
            run_made += 1
        if made == count:
            return
        yield emit(ev.RunCompleted, run_stream, 4, run_id=run_id)
        r += 1


# Ledgers ------------------------------------------------------------------------

def new_ledger(path: Path) -> Any:
    """A docket ledger holding only its genesis event (position 1)."""
    from docket.adapters.service_layer.kernel.ledger import Ledger

    ledger = Ledger(path)
    ledger.initialise(stamp(0))
    return ledger


def fill(ledger: Any, events: Iterator[ev.Event], batch: int = 5000) -> None:
    chunk: list[ev.Event] = []
    for event in events:
        chunk.append(event)
        if len(chunk) == batch:
            ledger.append(chunk)
            chunk = []
    if chunk:
        ledger.append(chunk)


def cached_ledger(size: int) -> Path:
    """bench/.work/ledger-<size>-<schema>.sqlite: genesis + (size - 1) mixed events, built once."""
    path = WORK / f"ledger-{size}-{schema_tag()}.sqlite"
    if path.exists():
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            if conn.execute("SELECT MAX(rowid) FROM stored_events").fetchone()[0] == size:
                return path
        for stale in WORK.glob(path.stem + "*"):
            stale.unlink()
    WORK.mkdir(parents=True, exist_ok=True)
    building = WORK / f"building-{size}.sqlite"
    for stale in WORK.glob(building.stem + "*"):
        stale.unlink()
    log(f"generating a {size:,}-event ledger (cached in {path.relative_to(WORK.parent.parent)})")
    t0 = time.perf_counter()
    ledger = new_ledger(building)
    fill(ledger, mixed_events(size - 1))
    ledger.close()
    with sqlite3.connect(building) as conn:  # fold the WAL in so one file is the whole ledger
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.replace(building, path)
    for leftover in WORK.glob(building.stem + "*"):
        leftover.unlink()
    log(f"generated in {time.perf_counter() - t0:.1f} s")
    return path


# Results ------------------------------------------------------------------------

@dataclass
class Row:
    bench: str
    figure: str          # what was measured, e.g. "docket 2000 x 1 event"
    value: float | None  # the measured figure
    unit: str
    ratio: float | None = None
    goal: str = ""
    passed: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.2f} s"
    if unit == "ms":
        return f"{value:,.3f} ms"
    if unit == "events/s":
        return f"{value:,.0f} ev/s"
    return f"{value:,.2f} {unit}"


def table(rows: list[Row]) -> str:
    head = ("benchmark", "figure", "value", "ratio", "goal", "result")
    body = [
        (r.bench, r.figure, fmt(r.value, r.unit), "" if r.ratio is None else f"{r.ratio:.2f}x",
         r.goal, "" if r.passed is None else ("PASS" if r.passed else "MISS"))
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in [head, *body]) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in body]
    return "\n".join(out)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import platform

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    from importlib.metadata import version

    return {
        "cpus": os.cpu_count(), "cpu": cpu, "memory": memory, "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version, "eventsourcing": version("eventsourcing"),
        "platform": platform.platform(), "disk": disk_of(WORK), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def disk_of(path: Path) -> str:
    """The device and file system holding path (from /proc/mounts: the longest matching mount point)."""
    best = ("", "unknown", "")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            if str(path.resolve()).startswith(mount) and len(mount) >= len(best[0]):
                best = (mount, device, fstype)
    except OSError:
        pass
    return f"{best[1]} ({best[2]}, mounted on {best[0]})"
