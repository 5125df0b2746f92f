"""The ledger application: eventsourcing's Application over the chained store.

Thin: decide and append inside the ledger's write transaction, read a stream
back with each event's ledger position, and find the intents still pending.

Every decision runs while the write lock is held, reading through the same
cursor that then writes, so no other writer can change what a decision read
(a lease grant reads the run, the worker and the lease) before it is appended.
Ledger time never runs backwards: the time a decision is given is clamped to
the last recorded event's time, inside that transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, OperationalError
from eventsourcing.utils import Environment

from ....domain import ledger as ledger_aggregate
from ....domain.aggregate import fold
from ....domain.kernel.errors import Conflict, NotFound
from ....domain.kernel.canonical import canonical_json
from ....domain.events import Event
from ....domain.kernel.snapshot import from_value, to_value
from .aggregates import aggregate_of, state_class_of
from .stream_cache import Folded, PendingScan, StreamCache
from ...world.files.files import prepare_ledger_file
from ...world.ledger.ledger_rows import DEFAULT_LOCK_TIMEOUT
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...world.clock import Clock
from ...world.ledger.store import CanonicalMapper, ChainedSQLiteFactory, ChainedSQLiteProcessRecorder, LedgerBusy, decode_event

__all__ = ["DEFAULT_LOCK_TIMEOUT", "Ledger", "PendingIntent"]

S = TypeVar("S")
SNAPSHOT_EVERY = 10  # versions between two snapshots of a stream: a command folds at most this many events
EFFECTOR_CURSOR = "effector"  # tracking row: every intent at or below it has its outcome (a cursor, not the truth)


MAX_OUTAGES = 10  # outages one call rides out, one after another, before it gives up (each waited out in full)


def _riding_out(method: Callable[..., Any]) -> Callable[..., Any]:
    """Call it again after an outage of a PostgreSQL ledger's database is waited out (database_outage.py), when
    nothing it did can have been kept: a read, or a write whose commit was not begun. A write that failed in its
    commit is not known to be recorded or not: StorageFailed, for ``docket go --resume`` and replay to settle. Inside
    a decision (its reads) the decision itself is what is called again."""
    @wraps(method)
    def riding_out(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        if self.url is None or self._cursor is not None:
            return method(self, *args, **kwargs)
        import psycopg
        from eventsourcing.persistence import InterfaceError

        from ....domain.kernel.errors import StorageFailed
        from ...world.ledger.database_outage import waiting_out

        outage = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
        for _ in range(MAX_OUTAGES):
            self.recorder.commit_begun = False
            try:
                return method(self, *args, **kwargs)
            except outage as e:
                if self.recorder.commit_begun:
                    raise StorageFailed(f"the ledger's database {self.where} went away while a write was being "
                                        f"committed, so whether it was recorded is not known ({e}); "
                                        "'docket go --resume' or 'docket replay --apply' settles it") from e
                waiting_out(self.recorder.ping, lambda error: isinstance(error, outage), self.where)
        return method(self, *args, **kwargs)

    return riding_out


@dataclass(frozen=True)
class PendingIntent:
    """An intent in the chain with no outcome in the chain, and its latest uncertain observation."""

    position: int
    intent: Any  # an Event whose effect_role is "intent"
    last_unknown: Any = None  # an IntentOutcomeUnknown event, or None


class Ledger(Application):
    name = "docket"

    def __init__(self, path: Path, *, lock_timeout: int = DEFAULT_LOCK_TIMEOUT, streams: StreamCache | None = None,
                 url: str | None = None):
        """The ledger file at path, or, with url (postgresql://...), the PostgreSQL database it names (path is then
        only where this machine's docket folder is)."""
        self.path = path
        self.url = url
        self.lock_timeout = lock_timeout
        self._cursor: Any = None  # the write transaction's cursor while a decision runs
        # streams the running decision folded: stream -> (fold, state, version)
        self._folded: dict[str, tuple[Callable[..., Any], Any, int]] = {}
        self._stored: dict[int, bytes] = {}  # position -> stored bytes of what the running decision appended
        # what this process already folded of each stream (shared by the connections of one docket go)
        self.streams = streams if streams is not None else StreamCache()
        # docket go's watch over the file (adapters/world/ledger/ledger_watch.py): told each head this connection wrote,
        # and asked before the target moves or a receipt is sealed. None: no watch (short-lived commands).
        self.watch: Any = None
        if url is not None:
            from ...world.ledger.database_url import postgres_env

            env = postgres_env(url, lock_timeout=lock_timeout)
        else:
            if str(path) != ":memory:":  # SQLite never names a file ":memory:": an in-memory ledger (tests)
                prepare_ledger_file(path)
            env = {"SQLITE_DBNAME": str(path), "SQLITE_LOCK_TIMEOUT": str(lock_timeout), "ORIGINATOR_ID_TYPE": "text"}
        try:
            super().__init__(env=env)
        except (OperationalError, LedgerBusy) as e:
            raise self._busy(e) from None
        except Exception as e:
            if url is not None and type(e).__module__.startswith(("eventsourcing", "psycopg")):
                from ....domain.kernel.errors import StorageFailed

                raise StorageFailed(f"cannot open the ledger's database {self.where}: {e}".strip()) from e
            raise
        self.recorder: ChainedSQLiteProcessRecorder

    def clock_skew_ms(self, clock: Clock) -> int | None:
        """How far the clock is ahead of the database server's (behind: negative), the query's round trip halved
        out; None for a ledger file (one host's clock, nothing to compare with)."""
        server_time = getattr(self.recorder, "server_time_ms", None)
        if server_time is None:
            return None
        from ....domain.kernel.values import to_ms

        before = to_ms(clock.now())
        server = server_time()
        after = to_ms(clock.now())
        return (before + after) // 2 - server

    @property
    def where(self) -> str:
        """The ledger's place for messages: its file, or its database's URL without a password."""
        if self.url is None:
            return str(self.path)
        from ...world.ledger.database_url import redacted

        return redacted(self.url)

    # Configuration is built here, explicitly; os.environ is not consulted.
    def construct_env(self, name: str, env: Any = None) -> Environment:
        return Environment(name, dict(env or {}))

    def construct_factory(self, env: Environment) -> Any:
        if self.url is not None:
            from ...world.ledger.postgres_store import ChainedPostgresFactory

            return ChainedPostgresFactory(env)
        return ChainedSQLiteFactory(env)

    def construct_mapper(self) -> CanonicalMapper:
        return CanonicalMapper()

    def construct_recorder(self) -> ChainedSQLiteProcessRecorder:
        return self.factory.process_recorder()

    def _busy(self, error: Exception) -> Exception:
        if "locked" in str(error) or "busy" in str(error) or isinstance(error, LedgerBusy):
            return Conflict(Code.LEDGER_BUSY, f"another process holds the ledger's write lock ({self.where}); "
                                           f"gave up after {self.lock_timeout}s (DOCKET_LOCK_TIMEOUT)")
        if self.url is not None:
            from ....domain.kernel.errors import StorageFailed

            return StorageFailed(f"cannot open the ledger's database {self.where}: {error}".strip())
        return error

    # Deciding and appending -------------------------------------------------
    @_riding_out
    def connection(self) -> Ledger:
        """Another connection to the same ledger, for another thread: it shares this one's stream cache and watch."""
        other = Ledger(self.path, url=self.url, lock_timeout=self.lock_timeout, streams=self.streams)
        other.watch = self.watch
        return other

    def decide(self, decision: Callable[[str], Event | Sequence[Event]], now: str) -> list[tuple[int, Event]]:
        """Run decision(now) inside the write transaction and append what it returns.

        ``now`` is the clock's reading; the decision gets it clamped so it is not
        earlier than the last recorded event. Reads the decision makes through
        this ledger (``get``, ``history``, ``pending_intents``) see the state
        the append is made on. Returns each appended event with its position.
        """
        try:
            with self.recorder.write_transaction() as c:
                self._cursor, self._folded, self._stored = c, {}, {}
                try:
                    floor = self._head_time(c)
                    decided = decision(max(now, floor or now))
                    appended = self._insert(c, [decided] if isinstance(decided, Event) else list(decided), floor)
                    folded = self._keep_snapshots(c, appended)
                    written = self._written_head(c, appended)
                finally:
                    self._cursor, self._folded, self._stored = None, {}, {}
            for stream, entry in folded.items():  # committed: what the decision folded, with what it appended
                self.streams.put(stream, entry)
            self._remember_intents(appended)
            self._tell_watch(written)
            return appended
        except LedgerBusy as e:
            raise self._busy(e) from None
        except IntegrityError:
            raise Conflict(Code.CONCURRENT_UPDATE, "another writer changed the same record; try again") from None

    @_riding_out
    def append(self, events: Sequence[Event]) -> list[int]:
        """Store already-decided events in one transaction; returns their ledger positions.

        An event dated before the last recorded one is recorded at that time instead.
        """
        try:
            with self.recorder.write_transaction() as c:
                appended = self._insert(c, list(events), self._head_time(c))
                written = self._written_head(c, appended)
            self._remember_intents(appended)
            self._tell_watch(written)
            return [position for position, _ in appended]
        except LedgerBusy as e:
            raise self._busy(e) from None

    def copy_stored(self, rows: Sequence[tuple[int, str, int, str, bytes, str | None]]) -> None:
        """Append another ledger's chain rows (position, stream, version, type, stored bytes, digest) exactly as
        stored, in one transaction: they must land at the same positions and this store's chain must reach the same
        digest at the last of them, else nothing of them is kept (ledger_copy.py)."""
        from eventsourcing.persistence import StoredEvent

        from ....domain.kernel.errors import VerificationFailed

        stored = [StoredEvent(originator_id=stream, originator_version=version, topic=topic, state=bytes(state))
                  for _position, stream, version, topic, state, _digest in rows]
        try:
            with self.recorder.write_transaction() as c:
                positions = self.recorder._insert_chained(c, stored)
                head = self.recorder._chain_head(c)
                if positions != [row[0] for row in rows] or head.digest != rows[-1][5]:
                    raise VerificationFailed(Code.CHAIN_BROKEN, f"the copy parts from the source at positions "
                                                             f"{rows[0][0]}..{rows[-1][0]}: nothing of them was kept")
        except LedgerBusy as e:
            raise self._busy(e) from None

    @_riding_out
    def digest_at(self, position: int) -> str | None:
        """The chain's digest at position (None: none recorded)."""
        with self.recorder.read_transaction() as c:
            digests = self.recorder.chain_digests_between(c, position - 1, position)
        return digests[0] if digests else None

    def _remember_intents(self, appended: list[tuple[int, Event]]) -> None:
        intents = {e.intent_id: p for p, e in appended if e.effect_role == "intent"}  # type: ignore[attr-defined]
        if intents:
            self.streams.remember_intents(intents)

    def _written_head(self, c: Any, appended: list[tuple[int, Event]]) -> Any:
        """The chain head this transaction wrote, when a watch wants to know it (read before the commit)."""
        return self.recorder._chain_head(c) if appended and self.watch is not None else None

    def _tell_watch(self, written: Any) -> None:
        if written is not None:  # committed: the transaction's block has exited without an error
            self.watch.wrote(written)

    def require_intact(self) -> None:
        """LedgerTampered when docket go's watch finds the file vanished, replaced or rewritten; else nothing."""
        if self.watch is not None:
            self.watch.check()

    def _insert(self, c: Any, events: list[Event], floor: str | None) -> list[tuple[int, Event]]:
        """Insert events, none dated before floor (the last recorded event's time) or its predecessor."""
        if not events:
            return []
        in_order = []
        for event in events:
            if floor is not None and event.recorded_at < floor:
                event = event.model_copy(update={"recorded_at": floor})
            floor = event.recorded_at
            in_order.append(event)
        events = in_order
        stored = [self.mapper.to_stored_event(e) for e in events]
        positions = self.recorder._insert_events(c, stored)
        if self._cursor is c:
            self._stored.update(zip(positions or [], (s.state for s in stored)))
        return list(zip(positions or [], events))

    def _head_time(self, c: Any) -> str | None:
        state = self.recorder.head_state(c)
        if state is None:
            return None
        tail = state[-41:]  # canonical JSON ends with "recorded_at":"<24-character time>"}
        if tail[:15] == b'"recorded_at":"' and tail[-2:] == b'"}':
            return tail[15:-2].decode("ascii", "replace")
        try:
            return json.loads(state)["recorded_at"]
        except (ValueError, KeyError, TypeError):
            return None

    # Reading -----------------------------------------------------------------
    @_riding_out
    def history(self, stream: str, *, after_version: int = 0,
                until_version: int | None = None) -> list[tuple[int, Event]]:
        return [
            (n.id, decode_event(stream, n.originator_version, n.topic, n.state))
            for n in self.recorder.select_stream(stream, self._cursor, after_version=after_version,
                                                 until_version=until_version)
        ]

    @_riding_out
    def events_of(self, *types: type[Event]) -> list[tuple[int, Event]]:
        """Every event of these types, of any stream, in ledger order, with its position (inside a decision: as the
        decision's write transaction sees them)."""
        return [(n.id, decode_event(n.originator_id, n.originator_version, n.topic, n.state))
                for n in self.recorder.select_topics([t.type_name() for t in types], self._cursor)]

    @_riding_out
    def get(self, apply: Callable[[S | None, Event, int], S], stream: str) -> S | None:
        """The aggregate of stream, or None if the stream has no events.

        Folded on from what this process already folded of the stream (see
        stream_cache), else from the stream's snapshot when it has a usable one,
        so a long stream costs no more than a short one: only the events
        appended since are read and folded.
        """
        state, version, rows = self._fold_from_cache(apply, stream)
        if rows is None:
            state, version = self._snapshot(apply, stream)
            rows = self.recorder.select_stream(stream, self._cursor, after_version=max(version - 1, 0))
            if version and (not rows or rows[0].originator_version != version):
                state, version = None, 0  # the snapshot's own event is not there: fold the stream from its start
                rows = self.recorder.select_stream(stream, self._cursor)
        last = rows[-1] if rows else None
        state = fold(apply, [(n.id, decode_event(stream, n.originator_version, n.topic, n.state))
                             for n in rows if n.originator_version > version], state)
        if last is not None and state is not None:
            version = last.originator_version
            self.streams.put(stream, Folded(apply, version, last.id, last.state, state))
        if self._cursor is not None:
            self._folded[stream] = (apply, state, version)
        return state

    def _fold_from_cache(self, apply: Callable[..., Any], stream: str) -> tuple[Any, int, list[Any] | None]:
        """(state, version, the stream's events from that version on) from what this process folded of the
        stream; rows None when it folded nothing of it or the ledger no longer holds what it folded."""
        cached = self.streams.get(stream, apply)
        if cached is None:
            return None, 0, None
        rows = self.recorder.select_stream(stream, self._cursor, after_version=cached.version - 1)
        first = rows[0] if rows else None
        if (first is None or first.originator_version != cached.version or first.id != cached.position
                or first.state != cached.stored):
            self.streams.forget(stream)
            return None, 0, None
        return cached.state, cached.version, rows

    def _snapshot(self, apply: Callable[..., Any], stream: str) -> tuple[Any, int]:
        """(state, version) from stream's snapshot, or (None, 0) when it has none it can use."""
        cls = state_class_of(apply)
        if cls is None:
            return None, 0
        if self._cursor is not None:
            row = self.recorder.select_snapshot(self._cursor, stream)
        else:
            with self.recorder.read_transaction() as c:
                row = self.recorder.select_snapshot(c, stream)
        if row is None:
            return None, 0
        version, _position, state = row
        try:
            restored = from_value(cls, json.loads(state))
        except (ValueError, TypeError):  # damaged: fold the stream from its start, as if there were none
            return None, 0
        return (restored, version) if getattr(restored, "version", None) == version else (None, 0)

    def _keep_snapshots(self, c: Any, appended: list[tuple[int, Event]]) -> dict[str, Folded]:
        """After a decision's append: snapshot each stream it folded whose version crossed a multiple of
        SNAPSHOT_EVERY, so the next command on it folds at most that many events. Returns each stream the
        decision folded and appended to, folded on with what it appended (for the cache, once committed)."""
        folded: dict[str, Folded] = {}
        for stream, (apply, state, version) in self._folded.items():
            new = [(position, event) for position, event in appended if event.stream == stream]
            if not new:
                continue
            before = getattr(state, "version", 0)
            state = fold(apply, new, state)
            if state is not None and state.version // SNAPSHOT_EVERY > before // SNAPSHOT_EVERY:
                self.recorder.save_snapshot(c, stream, state.version, new[-1][0], canonical_json(to_value(state)))
            follows = [event.version for _, event in new] == list(range(version + 1, version + 1 + len(new)))
            if state is not None and follows and new[-1][0] in self._stored:
                folded[stream] = Folded(apply, new[-1][1].version, new[-1][0], self._stored[new[-1][0]], state)
        return folded

    def snapshot_drift(self, *, repair: bool) -> list[str]:
        """Streams whose snapshot differs from folding their events (repaired if asked); replay's check."""
        drifted = []
        with self.recorder.write_transaction() as c:
            for stream, version, position, state in self.recorder.select_snapshots(c):
                apply, _cls = aggregate_of(stream.split(":", 1)[0]) or (None, None)
                events = self.recorder.select_stream(stream, c, until_version=version)
                truth = fold(apply, [(n.id, decode_event(stream, n.originator_version, n.topic, n.state))
                                     for n in events]) if apply else None
                expected = canonical_json(to_value(truth)) if truth is not None else None
                if expected != state or not events or events[-1].id != position:
                    drifted.append(stream)
                    if repair:
                        self.recorder.delete_snapshot(c, stream)
                        if expected is not None:
                            self.recorder.save_snapshot(c, stream, version, events[-1].id, expected)
        return drifted

    def keep_merkle_nodes(self, height: int, nodes: Sequence[tuple[int, str, bytes]]) -> None:
        """Keep Merkle subtree hashes, (node, chain digest at its last position, hash), for later trees."""
        with self.recorder.write_transaction() as c:
            self.recorder.save_merkle_nodes(c, height, nodes)

    @_riding_out
    def head(self) -> int:
        if self._cursor is not None:
            return self.recorder.head_position(self._cursor)
        return self.recorder.max_notification_id() or 0

    @_riding_out
    def pending_intents(self, *, after: int | None = None, only: Collection[str] | None = None
                        ) -> list[PendingIntent]:
        """Intents after a position that have no outcome in the chain, in ledger order (only those named, if given).

        By default the search starts at the effector's cursor, which only says
        where to start looking (every intent at or below it was resolved when it
        was moved); ``after=0`` reads the whole chain, as replay does. Named
        intents this process appended are looked for from where it appended
        them: an intent's outcomes follow it, so nothing before it can matter.
        """
        if self._cursor is not None:
            return self._only(self._pending(self._cursor, self._start(self._cursor, after, only)), only)
        with self.recorder.read_transaction() as c:
            return self._only(self._pending(c, self._start(c, after, only)), only)

    def _start(self, c: Any, after: int | None, only: Collection[str] | None) -> int | None:
        """Where to look for the named intents: from the earliest of them, when this process appended each one and
        the ledger still holds it there; else from after."""
        if after is None or not only:
            return after
        named = list(only)
        positions = [self.streams.intent_position(intent_id) for intent_id in named]
        if any(p is None or p <= after for p in positions):
            return after
        for intent_id, position in zip(named, positions):
            if self.recorder.intent_id_at(c, position) != intent_id:
                return after
        return min(p for p in positions if p is not None) - 1

    @staticmethod
    def _only(pending: list[PendingIntent], only: Collection[str] | None) -> list[PendingIntent]:
        return pending if only is None else [p for p in pending if p.intent.intent_id in only]

    def _pending(self, c: Any, after: int | None) -> list[PendingIntent]:
        from ....domain.effects import INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES  # not on a plain command's path

        if after is None:  # from the cursor: folded on from what this process already scanned
            rows = self._unresolved_since_cursor(c, INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES)
        else:
            rows = self.recorder.select_intent_events(c, after, INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES)
        intents: dict[str, tuple[int, Event]] = {}
        unknown: dict[str, Event] = {}
        for n in rows:
            event = decode_event(n.originator_id, n.originator_version, n.topic, n.state)
            intent_id = event.intent_id  # type: ignore[attr-defined]
            if event.effect_role == "intent":
                intents[intent_id] = (n.id, event)
            else:  # only unresolved intents and their unknowns come back: no outcome to drop
                unknown[intent_id] = event
        return [PendingIntent(position, intent, unknown.get(intent_id))
                for intent_id, (position, intent) in intents.items()]

    def _unresolved_since_cursor(self, c: Any, intents: Sequence[str], outcomes: Sequence[str],
                                 unknowns: Sequence[str]) -> list[Any]:
        """What select_intent_events(c, cursor, ...) returns, reading only the events after the last scan.

        An intent whose outcome stays unknown holds the effector's cursor back (it is observed again later, and
        holds no other intent back): scanning from the cursor each time would read every intent and outcome
        recorded since, ever more as the run goes on. The process keeps which intents were unresolved as of the
        head it last scanned to, from a start at or below the cursor, and reads only what was appended since; a
        cursor put back (replay) or a head this transaction does not see yet starts the scan afresh.
        """
        cursor = self.recorder.tracked(c, EFFECTOR_CURSOR)
        head = self.recorder.head_position(c)
        types = (*intents, *outcomes, *unknowns)
        outcome_types = set(outcomes)
        with self.streams.pending_lock:
            scan = self.streams.pending_scan
            if scan is None or scan.start > cursor or scan.scanned_to > head:
                scan = PendingScan(cursor, cursor, {})
            unresolved = {intent_id: [p for p in ps if p > cursor] for intent_id, ps in scan.unresolved.items()}
            for position, topic, intent_id in self.recorder.intent_rows(c, scan.scanned_to, head, types):
                if topic in outcome_types:
                    unresolved.pop(intent_id, None)
                else:
                    unresolved.setdefault(intent_id, []).append(position)
            unresolved = {intent_id: ps for intent_id, ps in unresolved.items() if ps}
            self.streams.pending_scan = PendingScan(cursor, head, unresolved)
        return self.recorder.notifications_at(c, sorted(p for ps in unresolved.values() for p in ps))

    @_riding_out
    def effector_cursor(self) -> int:
        with self.recorder.read_transaction() as c:
            return self.recorder.tracked(c, EFFECTOR_CURSOR)

    @_riding_out
    def advance_effector_cursor(self) -> int:
        """Move the cursor up to just below the first pending intent (or to the head); returns it."""
        try:
            with self.recorder.write_transaction() as c:
                current = self.recorder.tracked(c, EFFECTOR_CURSOR)
                pending = self._pending(c, None)
                target = pending[0].position - 1 if pending else self.recorder.head_position(c)
                if target > current:
                    self.recorder.set_tracking(c, EFFECTOR_CURSOR, target)
                return max(target, current)
        except LedgerBusy as e:
            raise self._busy(e) from None

    def rewind_effector_cursor(self, position: int) -> None:
        """Put the cursor back (replay found it past an intent that is still pending)."""
        try:
            with self.recorder.write_transaction() as c:
                self.recorder.set_tracking(c, EFFECTOR_CURSOR, position)
        except LedgerBusy as e:
            raise self._busy(e) from None

    # Genesis ----------------------------------------------------------------
    def genesis(self) -> Event | None:
        """The event at position 1, if it is a LedgerCreated."""
        first = self.recorder.select_notifications(start=1, limit=1)
        if not first or first[0].topic not in ledger_aggregate.GENESIS_TYPES:
            return None
        n = first[0]
        return decode_event(n.originator_id, n.originator_version, n.topic, n.state)

    @cached_property
    def repository_id(self) -> str | None:
        """The identity of the repository this ledger was created in (None: bound to none)."""
        genesis = self.genesis()
        return getattr(genesis, "repository_id", None)

    def is_initialised(self) -> bool:
        return self.genesis() is not None

    def require_initialised(self) -> None:
        if not self.is_initialised():
            raise NotFound(Code.NO_LEDGER, f"no docket ledger at {self.where}; run 'docket init' first")

    def initialise(self, now: str, repository_id: str | None = None, repository: str | None = None) -> bool:
        """Append LedgerCreated at position 1 unless it is there; True if created now."""
        created: list[bool] = []

        def decision(now: str) -> list[Event]:
            if self.head() != 0:
                if self.genesis() is None:
                    raise NotFound(Code.NO_LEDGER, f"{self.where} holds events but no LedgerCreated at position 1")
                return []
            created.append(True)
            return [ledger_aggregate.create(now, repository_id, repository)]

        self.decide(decision, now)
        return bool(created)
