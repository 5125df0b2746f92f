"""docket log: the ledger's events, streamed in constant memory, as lines or as one JSON document."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...domain.kernel.errors import BadInput, NotFound, VerificationFailed
from ...domain.kernel.streams import run_stream
from ..console.context import Context
from ..console.output import shown, streamed_document
from ..console.parsing import command
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...adapters.service_layer.kernel.ports import LedgerReader

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


def register(nouns: Any, common: Any) -> Any:
    """Declare `docket log` under nouns, as every command is declared."""
    return add_log_command(nouns, lambda group, name, handler, help, example:  # noqa: A006
                           command(group, name, handler, common, help, example))


def log(ctx: Context) -> int:
    a = ctx.args
    topics = _topics(a.type)
    reader = _listable_ledger(ctx)
    if a.run is not None and not reader.has_stream(run_stream(a.run)):
        raise NotFound(Code.RUN_NOT_FOUND, f"no run {a.run}")

    def matching(after: int, until: int) -> Iterator[dict[str, Any]]:
        from ...adapters.service_layer.kernel.event_log import listed_events

        for row, body in listed_events(reader, ctx.paths.views, run_id=a.run, topics=topics, after=after,
                                       until=until, lock_timeout=lambda: ctx.lock_timeout):
            yield _event_doc(row, body)

    write = sys.stdout.write
    if not a.follow:
        head = reader.head_position()
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
            head = reader.head_position()
            for doc in matching(position, head):
                write((json.dumps(doc, ensure_ascii=False, sort_keys=True) if ctx.json else _human_event(doc)) + "\n")
            sys.stdout.flush()
            position = head
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how one stops following


def _write_document(docs: Iterator[dict[str, Any]], head: int) -> None:
    """{"events": [...], "head": N} written event by event, byte for byte as json.dumps(indent=2) would.

    If reading fails midway, the document still ends as one valid JSON document:
    {"events": [those listed so far], "error": {"code": ..., "message": ...}, "head": N},
    with the usual one-line error on stderr and its exit code.
    """
    write = sys.stdout.write
    separator = "\n    "

    def close(error: dict[str, str] | None = None) -> None:
        end = "]" if separator == "\n    " else "\n  ]"
        if error is not None:
            member = json.dumps(error, ensure_ascii=False, sort_keys=True, indent=2).replace("\n", "\n  ")
            end += ',\n  "error": ' + member
        write(end + f',\n  "head": {head}\n}}\n')

    write('{\n  "events": [')
    with streamed_document(close):
        for doc in docs:
            write(separator + json.dumps(doc, ensure_ascii=False, sort_keys=True, indent=2).replace("\n", "\n    "))
            separator = ",\n    "
    close()


def _topics(type_: str | None) -> list[str]:
    if not type_:
        return []
    from ...domain.events import EVENT_TYPES

    topics = [t for t in EVENT_TYPES if t == type_ or t.split(".v")[0] == type_]
    if not topics:
        raise BadInput(Code.UNKNOWN_EVENT_TYPE, f"no event type {type_!r}; 'docket schema' lists them")
    return topics


def _event_doc(row: tuple[int, str, int, str, bytes], body: dict[str, Any]) -> dict[str, Any]:
    position, stream, version, type_, _state = row
    return {"position": position, "stream": stream, "version": version, "type": type_,
            "recorded_at": body["recorded_at"], "payload": body["payload"]}


def _human_event(doc: dict[str, Any]) -> str:
    payload = json.dumps(doc["payload"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return (f"{doc['position']:>8}  {shown(doc['recorded_at'])}  {shown(doc['type']):<24} {shown(doc['stream'])}  "
            f"{shown(payload)}")


def _listable_ledger(ctx: Context) -> LedgerReader:
    """The ledger's reader, unless the ledger is visibly damaged: log does not list what cannot be verified."""
    try:
        reader = ctx.ledger_reader
    except VerificationFailed as e:
        raise VerificationFailed(e.code, f"{e.message}; nothing is listed (run 'docket verify')") from None
    last_event, chain_end = reader.last_event_and_chain_end()
    if last_event != chain_end:
        raise VerificationFailed(Code.LEDGER_UNVERIFIABLE, f"the ledger's last event is at position {last_event} "
                                                        f"but its chain ends at {chain_end}; nothing is listed "
                                                        "(run 'docket verify')")
    return reader
