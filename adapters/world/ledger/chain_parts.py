"""Verifying a ledger's hash chain in parts, each in its own child process.

Each position's check needs only the digest stored at the position before it
(and that event's recorded time), so a ledger of N events split at m is
verified as [1..m] from the genesis digest and [m+1..N] from the digest and
time stored at m: if every stored digest in every part equals its
recomputation, the whole chain holds. The break reported is the one a single
pass reports: the first part that breaks names it, later parts only count when
every part before them is clean. Verify is CPU-bound (two sha256 per event),
so on a machine with several cores the parts take turns with nothing.
"""

from __future__ import annotations

import os
import pickle
import select
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ....domain.kernel.chain import GENESIS_DIGEST, ChainBreak, ChainHead, recorded_time, verify_chain
from ....domain.kernel.errors import VerificationFailed
from .ledger_rows import connect_read_only, first_undecodable, head_position, read_chain_rows, undecodable_column
from ....domain.kernel.codes import Code
import mmap

__all__ = ["MAX_PARTS", "PARTS_FROM_EVENTS", "part_count", "usable_cpus", "verify_chain_in_parts"]

# Below this many events, forking and opening a connection per part costs more than it saves
# (docs/performance.md, "Verify in parts").
PARTS_FROM_EVENTS = 100_000
MAX_PARTS = 4
PROGRESS_EVERY = 4096  # rows between a part's progress reports (a power of two: one AND per row)

Part = tuple[int, int, ChainHead, str | None, ChainHead | None]  # after, until, start, start time, anchor


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def part_count(events: int, *, parts: int | None = None, min_events: int | None = None) -> int:
    """How many parts verify splits a ledger of this many events into: 1 below the threshold or on one CPU."""
    if events < (PARTS_FROM_EVENTS if min_events is None else min_events):
        return 1
    return parts if parts is not None else min(usable_cpus(), MAX_PARTS)


def verify_chain_in_parts(
    conn: sqlite3.Connection, *, anchor: ChainHead | None = None, until: int | None = None,
    progress: Callable[[int], None] | None = None, parts: int | None = None, min_events: int | None = None,
) -> tuple[ChainHead, ChainBreak | None]:
    """verify_chain over the ledger conn reads, in parts in child processes when that is worth it.

    The same result as ``verify_chain(read_chain_rows(conn, until=until), anchor=anchor)``.
    Parts are used for at least ``min_events`` (PARTS_FROM_EVENTS) events and more than one
    usable CPU; ``parts`` overrides the CPU count. A part whose start cannot be read (its event or stored
    digest missing, or no recorded time) means a damaged ledger: it is verified in one pass,
    which names the break as always. A part whose process dies raises VerificationFailed.
    """
    try:
        end = head_position(conn) if until is None else min(until, head_position(conn))
        count = part_count(end, parts=parts, min_events=min_events)
        path = _file_of(conn)
        plan = _plan(conn, end, count, anchor) if count > 1 and path is not None else None
        if plan is None:
            return _verified(conn, until=until, anchor=anchor, progress=progress)
    except sqlite3.OperationalError as e:  # text that is not UTF-8 where a part starts: verified in one pass
        if undecodable_column(e) is None:
            raise
        return _verified(conn, until=until, anchor=anchor)
    assert path is not None  # a plan is made for a ledger file only
    results = _run_parts(path, plan, progress)
    for (_after, until_, *_), (head, broken) in zip(plan, results):
        if broken is None and head.position != until_:  # cannot happen: the part's last event was read above
            broken = ChainBreak(head.position + 1, "event missing (positions are not contiguous)")
        if broken is not None:
            return head, broken
    return results[-1]


def _verified(conn: sqlite3.Connection, *, after: int = 0, until: int | None = None, anchor: ChainHead | None = None,
              start: ChainHead = ChainHead(0, GENESIS_DIGEST), start_time: str | None = None,
              progress: Callable[[int], None] | None = None, rows_seen: Callable[[Any], Any] | None = None,
              ) -> tuple[ChainHead, ChainBreak | None]:
    """verify_chain over positions (after, until]. Text in the file that is not UTF-8 where docket stores text (a
    digest, stream, type or state: only an edit outside docket writes that) breaks the chain at the first position
    holding it, as any other edit does, after the positions before it are verified as usual."""
    rows: Iterable[Any] = read_chain_rows(conn, after=after, until=until)
    if rows_seen is not None:
        rows = rows_seen(rows)
    try:
        return verify_chain(_counted(rows, progress) if progress else rows, anchor=anchor, start=start,
                            start_time=start_time)
    except sqlite3.OperationalError as e:
        found = first_undecodable(conn, after=after, until=until) if undecodable_column(e) is not None else None
        if found is None:
            raise
    position, column = found
    before = anchor if anchor is not None and anchor.position < position else None
    head, broken = verify_chain(read_chain_rows(conn, after=after, until=position - 1), anchor=before, start=start,
                                start_time=start_time)
    return head, broken or ChainBreak(position, f"the stored {column} is not UTF-8 text (the ledger was changed "
                                                "outside docket)")


def _file_of(conn: sqlite3.Connection) -> Path | None:
    """The file conn reads (each child opens its own connection: one is never shared across fork)."""
    for _seq, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return Path(file) if file else None
    return None


def _plan(conn: sqlite3.Connection, end: int, count: int, anchor: ChainHead | None) -> list[Part] | None:
    """Positions 1..end in count parts, each with the stored digest and time it starts from; None if one has none."""
    bounds = [end * i // count for i in range(count + 1)]
    plan: list[Part] = []
    for i, (after, until) in enumerate(zip(bounds, bounds[1:])):
        start, start_time = ChainHead(0, GENESIS_DIGEST), None
        if after:
            row = next(read_chain_rows(conn, after=after - 1, until=after), None)
            start_time = recorded_time(row[4]) if row is not None else None
            if row is None or row[5] is None or start_time is None:
                return None
            start = ChainHead(after, row[5])
        last = i == count - 1
        # The anchor goes to the part holding its position, and to the last part for "ends before the anchor".
        part_anchor = anchor if anchor is not None and (last or after < anchor.position <= until) else None
        plan.append((after, until, start, start_time, part_anchor))
    return plan


def _run_parts(path: Path, plan: list[Part], progress: Callable[[int], None] | None
               ) -> list[tuple[ChainHead, ChainBreak | None]]:
    """Fork one child per part; each sends its (head, break) back, pickled, over its own pipe."""

    done = memoryview(mmap.mmap(-1, 8 * len(plan))).cast("q")  # rows each part has verified, shared across fork
    children: list[tuple[int, int]] = []  # pid, read end of its pipe
    try:
        for slot, part in enumerate(plan):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(read_end)
                _child(path, part, write_end, done, slot if progress else None)
            os.close(write_end)
            children.append((pid, read_end))
        sent = _collect([fd for _pid, fd in children], lambda: progress(sum(done)) if progress else None)
    finally:
        for pid, fd in children:
            os.close(fd)
            _reap(pid)
    results = []
    for (after, until, *_), data in zip(plan, sent):
        try:
            outcome, value = pickle.loads(data)
        except Exception:  # nothing or a part of it: the child died before it finished
            raise VerificationFailed(Code.VERIFY_INCOMPLETE, f"positions {after + 1}-{until} were not verified: "
                                     "the process verifying them ended without a result") from None
        if outcome != "ok":
            raise VerificationFailed(Code.VERIFY_INCOMPLETE, f"positions {after + 1}-{until} were not verified: {value}")
        results.append(value)
    return results


def _child(path: Path, part: Part, write_end: int, done: memoryview, slot: int | None) -> None:
    """Verify one part and write the result to write_end; exit without running the parent's clean-up."""
    after, until, start, start_time, anchor = part
    status = 1
    try:
        try:
            conn = connect_read_only(path)
            reported = None if slot is None else (lambda rows: _reported(rows, done, slot))
            result: tuple[str, Any] = ("ok", _verified(conn, after=after, until=until, anchor=anchor, start=start,
                                                       start_time=start_time, rows_seen=reported))
            status = 0
        except BaseException as e:  # reported by the parent as this part's failure
            result = ("error", f"{type(e).__name__}: {e}")
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(pickle.dumps(result))
    finally:
        os._exit(status)


def _collect(fds: list[int], tick: Callable[[], None]) -> list[bytes]:
    """Everything written to each pipe until its end is closed, calling tick between reads."""
    received = {fd: bytearray() for fd in fds}
    open_fds = set(fds)
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], 0.1)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                received[fd] += chunk
            else:
                open_fds.discard(fd)
        tick()
    return [bytes(received[fd]) for fd in fds]


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _reported(rows: Iterable[Any], done: memoryview, slot: int) -> Iterator[Any]:
    for n, row in enumerate(rows, 1):
        if not n & (PROGRESS_EVERY - 1):
            done[slot] = n
        yield row


def _counted(rows: Iterable[Any], progress: Callable[[int], None]) -> Iterator[Any]:
    for row in rows:
        progress(row[0])
        yield row
