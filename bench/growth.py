"""5. growth: cost per transition as history grows, docket against whole-document rewrites.

reference: the systems docket replaces keep one canonical-JSON state document
holding every transition so far and, per transition, rewrite all of it
durably: serialise, write a temp file, fsync it, os.replace it over the
document, fsync the folder.
docket: one single-event ``Ledger.append`` per transition.
Both start from a history of 1k and 10k transitions (and 100k in a full run);
then each new transition is timed on its own. Each system is timed in its
own phase (docket first), taking turns between the history sizes, so a slow
moment of the disk hits every size alike. Each figure is the median over the
timed transitions; the ratio is the cost at that size against the cost at 1k.
docket's history ends with single-event appends, as real transitions arrive:
until SQLite's WAL file reaches its steady size each commit costs more, a
one-time effect of a young file that would otherwise pass for "history".
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from docket.domain import events as ev

from .common import Row, fill, lease_events, log, median, new_ledger, remove, temp_dir, timed

WARM = 20     # untimed transitions first, on each side
RECENT = 999  # docket's history ends with this many single-event appends
GOAL = 1.25   # docket: the cost at 10k within 25% of the cost at 1k, i.e. flat
_encode = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def transition(event: ev.Event) -> dict[str, Any]:
    """The reference's record of one transition: the same facts as the docket event."""
    return {"type": event.name, "key": event.stream, "version": event.version, "at": event.recorded_at,
            **event.payload()}


def write_document(path: Path, document: dict[str, Any]) -> None:
    data = _encode(document).encode("utf-8")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Reference:
    """The whole-document store, already holding `history` transitions."""

    def __init__(self, folder: Path, history: int):
        self.path = folder / "state.json"
        self.transitions = [transition(e) for e in lease_events(history)]
        write_document(self.path, {"transitions": self.transitions})

    def record(self, event: ev.Event) -> None:
        self.transitions.append(transition(event))
        write_document(self.path, {"transitions": self.transitions})


class Docket:
    """A docket ledger already holding `history` events (genesis included)."""

    def __init__(self, folder: Path, history: int):
        self.ledger = new_ledger(folder / "ledger.sqlite")
        events = lease_events(history - 1)
        fill(self.ledger, iter(events[:-RECENT]))
        # The latest transitions one per transaction, as they happen: the WAL file has
        # then reached its steady size (while it still grows, each commit costs more).
        for event in events[-RECENT:]:
            self.ledger.append([event])

    def record(self, event: ev.Event) -> None:
        self.ledger.append([event])


def run(quick: bool) -> list[Row]:
    sizes = [1_000, 10_000] + ([] if quick else [100_000])
    samples = 100
    folders = {size: temp_dir() for size in sizes}
    times: dict[tuple[str, int], list[float]] = {}
    try:
        log(f"growth: preparing histories of {', '.join(f'{s:,}' for s in sizes)} transitions")
        systems = {}
        for size in sizes:
            systems["reference", size] = Reference(folders[size], size)
            systems["docket", size] = Docket(folders[size], size)
        # The reference's new transitions continue its history; docket's continue after its genesis.
        new = {size: lease_events(WARM + samples, start=size) for size in sizes}
        new_docket = {size: lease_events(WARM + samples, start=size - 1) for size in sizes}
        for who, events in (("docket", new_docket), ("reference", new)):
            for i in range(WARM + samples):
                for size in sizes:
                    took = timed(lambda s=systems[who, size], e=events[size][i]: s.record(e))
                    if i >= WARM:
                        times.setdefault((who, size), []).append(took)
        for size in sizes:
            systems["docket", size].ledger.close()
    finally:
        for folder in folders.values():
            remove(folder)
    cost = {key: median(values) for key, values in times.items()}
    rows = []
    for who, label in (("reference", "rewrite whole JSON document + fsync"),
                       ("docket", "docket Ledger.append, 1 event")):
        for size in sizes:
            ratio = cost[who, size] / cost[who, sizes[0]] if size != sizes[0] else None
            judged = who == "docket" and size == 10_000
            rows.append(Row("growth", f"{label}, history {size:,}", cost[who, size] * 1000, "ms", ratio=ratio,
                            goal=f"<= {GOAL}x (flat)" if judged else "",
                            passed=(ratio <= GOAL) if judged and ratio is not None else None))
        log("growth " + who + ": " + ", ".join(f"{s:,}: {cost[who, s] * 1000:.3f} ms" for s in sizes))
    return rows
