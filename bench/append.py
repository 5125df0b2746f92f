"""1. append: docket's Ledger.append against a bare eventsourcing SQLite application.

Both store the same lease events (a LeaseGranted then LeaseRenewed per stream,
over 50 streams) in the same transaction sizes, into fresh files in a temp
folder, with the library's default SQLite settings (WAL, synchronous FULL).
The bare application is the library's own ``Application`` with
``PERSISTENCE_MODULE=eventsourcing.sqlite`` and the library's own frozen-
dataclass ``DomainEvent`` classes carrying the same payload fields; it saves
with ``app.save(*events)``. Events are built before the clock starts, so the
figure is the cost of storing: mapping, the transaction, and for docket the
canonical JSON, the chain head read, the digests and the chain rows.
Each scenario runs five times, alternating which system goes first; the
median is kept. The same scenarios are repeated on tmpfs (/dev/shm), for
information: with no disk flush the remaining cost is CPU, and docket's extra
work shows more plainly.
"""

from __future__ import annotations

import gc
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import DomainEvent

from docket.domain import events as ev

from .common import Row, lease_events, log, median, new_ledger, remove, temp_dir, timed

GOAL = 1.3
TMPFS = Path("/dev/shm")  # memory-backed: shows the CPU part of the cost, with no disk flush


class TextStreamEvent(DomainEvent):
    """The library's frozen-dataclass event, with text stream ids (ORIGINATOR_ID_TYPE=text)."""

    def __post_init__(self) -> None:  # DomainEvent insists on UUIDs; streams here are text
        pass


def bare_class(cls: type[ev.Event]) -> type[DomainEvent]:
    """A DomainEvent subclass with the same payload fields as docket's event class."""
    fields = [f for f in cls.model_fields if f not in ("stream", "version", "recorded_at")]
    bare = type(cls.name, (TextStreamEvent,), {
        "__annotations__": {f: Any for f in fields},
        "__module__": __name__,
        "__qualname__": cls.name,
    })
    globals()[cls.name] = bare  # so the library can resolve its topic
    return bare


BARE = {cls: bare_class(cls) for cls in (ev.LeaseGranted, ev.LeaseRenewed)}


def to_bare(event: ev.Event) -> DomainEvent:
    at = datetime.strptime(event.recorded_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return BARE[type(event)](originator_id=event.stream, originator_version=event.version, timestamp=at,
                             **event.payload())


def bare_genesis() -> DomainEvent:
    first = lease_events(1, resources=1)[0]
    return BARE[type(first)](originator_id="ledger", originator_version=1,
                             timestamp=datetime.now(timezone.utc), **first.payload())


def bare_app(path: Path) -> Application:
    return Application(env={
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "ORIGINATOR_ID_TYPE": "text",
    })


def run_docket(folder: Path, batches: list[list[ev.Event]]) -> float:
    ledger = new_ledger(folder / "docket.sqlite")  # genesis at position 1, then the timed appends
    try:
        gc.collect()
        return timed(lambda: [ledger.append(b) for b in batches])
    finally:
        ledger.close()


def run_bare(folder: Path, batches: list[list[DomainEvent]]) -> float:
    app = bare_app(folder / "bare.sqlite")
    try:
        app.save(bare_genesis())  # one event before the timed saves, like docket's genesis
        gc.collect()
        return timed(lambda: [app.save(*b) for b in batches])
    finally:
        app.close()


def scenario(label: str, saves: int, per_save: int, repeat: int, tmpfs: bool = False) -> list[Row]:
    events = lease_events(saves * per_save)
    docket_batches = [events[i:i + per_save] for i in range(0, len(events), per_save)]
    bare_batches = [[to_bare(e) for e in b] for b in docket_batches]
    docket_times, bare_times = [], []
    for i in range(repeat):  # alternate, so drift in the machine hits both alike
        folder = temp_dir(TMPFS) if tmpfs else temp_dir()
        try:
            if i % 2 == 0:
                docket_times.append(run_docket(folder, docket_batches))
                bare_times.append(run_bare(folder, bare_batches))
            else:
                bare_times.append(run_bare(folder, bare_batches))
                docket_times.append(run_docket(folder, docket_batches))
        finally:
            remove(folder)
    d, b = median(docket_times), median(bare_times)
    n = saves * per_save
    log(f"append {label}{' on tmpfs' if tmpfs else ''}: docket {d:.3f} s, bare {b:.3f} s")
    if tmpfs:  # information only: without a disk flush, what is left is the CPU cost
        figure = f"  same on tmpfs: docket vs bare, {saves:,} x {per_save} (bare {b / saves * 1000:.3f} ms)"
        return [Row("append", figure, d / saves * 1000, "ms", ratio=d / b, goal="(info: no disk)")]
    return [
        Row("append", f"bare eventsourcing, {saves:,} saves x {per_save} event(s)", b / saves * 1000, "ms"),
        Row("append", f"docket Ledger.append, {saves:,} saves x {per_save} event(s)", d / saves * 1000, "ms",
            ratio=d / b, goal=f"<= {GOAL}x bare", passed=d / b <= GOAL),
        Row("append", f"docket events/s in {per_save}-event saves (bare {n / b:,.0f})", n / d, "events/s"),
    ]


def run(quick: bool) -> list[Row]:
    single = 500 if quick else 2000
    batches = 50 if quick else 200
    rows = []
    for per_save, saves in ((1, single), (100, batches)):
        rows += scenario(f"{saves} x {per_save}", saves, per_save, repeat=5)
        if TMPFS.is_dir():
            rows += scenario(f"{saves} x {per_save}", saves, per_save, repeat=5, tmpfs=True)
    return rows
