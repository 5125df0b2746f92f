"""docket log: the ledger's events, streamed in constant memory, as lines or as one JSON document."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from ..domain.errors import BadInput, NotFound, VerificationFailed
from ..domain.streams import run_stream
from .context import Context
from .output import shown

__all__ = ["EXAMPLE", "HELP", "add_log_arguments", "add_log_command", "log"]

HELP = "list ledger events"
EXAMPLE = "docket log --run run-7k2m9x4q --type LeaseGranted"


def add_log_arguments(parser: Any) -> None:
    parser.add_argument("--run", metavar="RUN", help="only events of this run")
    parser.add_argument("--type", metavar="TYPE",
                        help="only events of this type (e.g. LeaseGranted or LeaseGranted.v1)")
    parser.add_argument("--follow", action="store_true", help="keep printing new events (with --json: one per line)")


def add_log_command(nouns: Any, command: Any) -> Any:
    """Declare `docket log` under nouns; command(nouns, name, handler, help, example) makes a command's parser."""
    parser = command(nouns, "log", log, HELP, EXAMPLE)
    add_log_arguments(parser)
    return parser


def log(ctx: Context) -> int:
    from ..adapters.world.reader import has_stream, head_position

    a = ctx.args
    topics = _topics(a.type)
    conn = _listable_ledger(ctx)
    if a.run is not None and not has_stream(conn, run_stream(a.run)):
        raise NotFound("run-not-found", f"no run {a.run}")

    def matching(after: int, until: int) -> Iterator[dict[str, Any]]:
        from ..adapters.app.event_log import belongs_to_run, run_rows
        from ..adapters.world.reader import read_events

        if a.run is None:
            rows = read_events(conn, after=after, until=until, topics=topics)
        else:
            rows = run_rows(conn, ctx.paths.views, a.run, after=after, until=until,
                            lock_timeout=lambda: ctx.lock_timeout)
        for row in rows:
            if topics and row[3] not in topics:
                continue
            body = json.loads(row[4])
            if a.run is None or belongs_to_run(row, body["payload"], a.run):
                yield _event_doc(row, body)

    write = sys.stdout.write
    if not a.follow:
        head = head_position(conn)
        if ctx.json:
            _write_document(matching(0, head), head)
        else:
            for doc in matching(0, head):
                write(_human_event(doc) + "\n")
        sys.stdout.flush()
        return 0
    position = 0
    try:
        while True:
            head = head_position(conn)
            for doc in matching(position, head):
                write((json.dumps(doc, ensure_ascii=False, sort_keys=True) if ctx.json else _human_event(doc)) + "\n")
            sys.stdout.flush()
            position = head
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how one stops following


def _write_document(docs: Iterator[dict[str, Any]], head: int) -> None:
    """{"events": [...], "head": N} written event by event, byte for byte as json.dumps(indent=2) would."""
    write = sys.stdout.write
    write('{\n  "events": [')
    separator = "\n    "
    for doc in docs:
        write(separator + json.dumps(doc, ensure_ascii=False, sort_keys=True, indent=2).replace("\n", "\n    "))
        separator = ",\n    "
    write(("]" if separator == "\n    " else "\n  ]") + f',\n  "head": {head}\n}}\n')


def _topics(type_: str | None) -> list[str]:
    if not type_:
        return []
    from ..domain.events import EVENT_TYPES

    topics = [t for t in EVENT_TYPES if t == type_ or t.split(".v")[0] == type_]
    if not topics:
        raise BadInput("unknown-event-type", f"no event type {type_!r}; 'docket schema' lists them")
    return topics


def _event_doc(row: tuple[int, str, int, str, bytes], body: dict[str, Any]) -> dict[str, Any]:
    position, stream, version, type_, _state = row
    return {"position": position, "stream": stream, "version": version, "type": type_,
            "recorded_at": body["recorded_at"], "payload": body["payload"]}


def _human_event(doc: dict[str, Any]) -> str:
    payload = json.dumps(doc["payload"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return (f"{doc['position']:>8}  {shown(doc['recorded_at'])}  {shown(doc['type']):<24} {shown(doc['stream'])}  "
            f"{shown(payload)}")


def _listable_ledger(ctx: Context) -> Any:
    """The ledger, unless it is visibly damaged: log does not list what cannot be verified."""
    from ..adapters.world.reader import last_event_and_chain_end

    try:
        conn = ctx.read_ledger()
    except VerificationFailed as e:
        raise VerificationFailed(e.code, f"{e.message}; nothing is listed (run 'docket verify')") from None
    last_event, chain_end = last_event_and_chain_end(conn)
    if last_event != chain_end:
        raise VerificationFailed("ledger-unverifiable", f"the ledger's last event is at position {last_event} "
                                                        f"but its chain ends at {chain_end}; nothing is listed "
                                                        "(run 'docket verify')")
    return conn
