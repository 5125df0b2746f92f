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
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

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
from .ledger_outages import _riding_out
from .pending_intents import PendingIntent, PendingIntents
from .stream_cache import Folded, StreamCache
from ...world.files.files import prepare_ledger_file
from ...world.ledger.ledger_rows import DEFAULT_LOCK_TIMEOUT
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...world.clock import Clock
from ...world.ledger.store import CanonicalMapper, ChainedSQLiteFactory, ChainedSQLiteProcessRecorder, LedgerBusy, decode_event

__all__ = ["DEFAULT_LOCK_TIMEOUT", "Ledger", "PendingIntent"]

S = TypeVar("S")
E = TypeVar("E", bound=Event)
SNAPSHOT_EVERY = 10  # versions between two snapshots of a stream: a command folds at most this many events


class Ledger(Application, PendingIntents):
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
        # or ChainedPostgresProcessRecorder, which has the same methods (self.recorder's type, above)
        return cast(ChainedSQLiteProcessRecorder, self.factory.process_recorder())

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
    def events_of(self, *types: type[E]) -> list[tuple[int, E]]:
        """Every event of these types, of any stream, in ledger order, with its position (inside a decision: as the
        decision's write transaction sees them)."""
        return [(n.id, cast(E, decode_event(n.originator_id, n.originator_version, n.topic, n.state)))  # of types
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
