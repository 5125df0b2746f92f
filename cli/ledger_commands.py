"""docket init / log / verify / replay / schema / completion."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ..domain.errors import BadInput, NotFound, OutcomeUnknown, VerificationFailed
from .context import Context
from .output import Progress, emit, shown


def init(ctx: Context) -> int:
    """Create the ledger, bound to the repository around the working directory (if any)."""
    from ..adapters.identity import ensure_identity

    ledger = ctx.open_ledger()
    created = False
    if not ledger.is_initialised():
        common = ctx.repository
        repository_id = ensure_identity(common) if common is not None else None
        created = ledger.initialise(ctx.clock.now(), repository_id, str(common) if common is not None else None)
    if not created:
        ctx.require_own_repository(ledger)
    ctx.update_views()
    doc = {"created": created, "ledger": str(ctx.paths.ledger), "views": str(ctx.paths.views),
           "repository_id": ledger.repository_id}
    emit(ctx.json, doc, f"{'created' if created else 'already have'} ledger {shown(ctx.paths.ledger)}")
    return 0


def _event_doc(row: tuple[int, str, int, str, bytes]) -> dict[str, Any]:
    position, stream, version, type_, state = row
    body = json.loads(state)
    return {"position": position, "stream": stream, "version": version, "type": type_,
            "recorded_at": body["recorded_at"], "payload": body["payload"]}


def _human_event(doc: dict[str, Any]) -> str:
    payload = json.dumps(doc["payload"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return (f"{doc['position']:>8}  {shown(doc['recorded_at'])}  {shown(doc['type']):<24} {shown(doc['stream'])}  "
            f"{shown(payload)}")


def log(ctx: Context) -> int:
    from ..adapters.reader import read_events
    from ..domain.events import EVENT_TYPES

    a = ctx.args
    topics: list[str] = []
    if a.type:
        topics = [t for t in EVENT_TYPES if t == a.type or t.split(".v")[0] == a.type]
        if not topics:
            raise BadInput("unknown-event-type", f"no event type {a.type!r}; 'docket schema' lists them")
    conn = _listable_ledger(ctx)
    if a.run is not None and conn.execute("SELECT 1 FROM stored_events WHERE originator_id = ?",
                                          (f"run:{a.run}",)).fetchone() is None:
        raise NotFound("run-not-found", f"no run {a.run}")

    def matching(after: int, until: int) -> list[dict[str, Any]]:
        docs = []
        for row in read_events(conn, after=after, until=until, topics=topics):
            doc = _event_doc(row)
            if a.run is None or doc["payload"].get("run_id") == a.run or doc["stream"] == f"run:{a.run}":
                docs.append(doc)
        return docs

    from ..adapters.reader import head_position

    if not a.follow:
        head = head_position(conn)
        docs = matching(0, head)
        emit(ctx.json, {"events": docs, "head": head}, "\n".join(map(_human_event, docs)) or None)
        return 0
    position = 0
    try:
        while True:
            head = head_position(conn)
            for doc in matching(position, head):
                line = json.dumps(doc, ensure_ascii=False, sort_keys=True) if ctx.json else _human_event(doc)
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
            position = head
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how one stops following


MAX_POSITION = 2**53 - 1  # what every store and JSON reader can hold
HEX_DIGITS = frozenset("0123456789abcdef")


def _listable_ledger(ctx: Context) -> Any:
    """The ledger, unless it is visibly damaged: log does not list what cannot be verified."""
    try:
        conn = ctx.read_ledger()
    except VerificationFailed as e:
        raise VerificationFailed(e.code, f"{e.message}; nothing is listed (run 'docket verify')") from None
    last_event, chain_end = conn.execute(
        "SELECT (SELECT MAX(rowid) FROM stored_events), (SELECT MAX(position) FROM chain)").fetchone()
    if (last_event or 0) != (chain_end or 0):
        raise VerificationFailed("ledger-unverifiable", f"the ledger's last event is at position {last_event or 0} "
                                                        f"but its chain ends at {chain_end or 0}; nothing is listed "
                                                        "(run 'docket verify')")
    return conn


def _read_anchor(path: str) -> Any:
    from ..domain.chain import ChainHead

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound("anchor-not-found", f"no anchor file {path}") from None
    except (OSError, ValueError) as e:
        raise BadInput("bad-anchor", f"{path} is not a JSON anchor: {e}") from None
    head = doc.get("head", doc) if isinstance(doc, dict) else None
    position = head.get("position") if isinstance(head, dict) else None
    digest = head.get("digest") if isinstance(head, dict) else None
    # bool is an int in Python: `true` is not position 1.
    if type(position) is not int or not 1 <= position <= MAX_POSITION:
        raise BadInput("bad-anchor", f"{path} needs a 'position' (a whole number from 1), at the top or under 'head'")
    if not (isinstance(digest, str) and len(digest) == 64 and set(digest) <= HEX_DIGITS):
        raise BadInput("bad-anchor", f"{path} needs a 'digest' (64 lowercase hex digits), at the top or under 'head'")
    return ChainHead(position, digest)


def verify_ledger(ctx: Context, *, anchor: Any = None, until: int | None = None) -> dict[str, Any]:
    """Recompute the chain; raise VerificationFailed naming the first bad position."""
    from ..adapters.reader import head_position, orphan_digest_after, read_chain_rows
    from ..domain.chain import CHAIN_ALGORITHM, ChainBreak, verify_chain

    conn = ctx.read_ledger()
    broken = _genesis_break(conn)
    head = None
    if broken is None:
        rows = read_chain_rows(conn, until=until)
        progress = Progress("verifying", head_position(conn))
        try:
            head, broken = verify_chain(_counted(rows, progress) if progress.enabled else rows, anchor=anchor)
        finally:
            progress.close()
    if broken is None and until is None:
        orphan = orphan_digest_after(conn, head.position)
        if orphan is not None:
            broken = ChainBreak(head.position + 1, "event missing; its digest is still recorded")
    if broken is not None:
        raise VerificationFailed("chain-broken", f"position {broken.position}: {broken.reason}")
    from ..adapters.schema_check import check_schema

    check_schema(conn)
    return {"ok": True, "events": head.position, "head": {"position": head.position, "digest": head.digest},
            "algorithm": CHAIN_ALGORITHM}


def _genesis_break(conn: Any) -> Any:
    """Position 1 must be a genuine LedgerCreated: the ledger stream's first event, fixing this chain's genesis."""
    from ..domain.chain import CHAIN_ALGORITHM, GENESIS_DIGEST, ChainBreak
    from ..domain.events import EVENT_TYPES
    from ..domain.ledger import GENESIS_TYPES, LEDGER_STREAM

    row = conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events WHERE rowid = 1").fetchone()
    if row is None:
        raise NotFound("no-ledger", "the ledger holds no events; run 'docket init' first")
    stream, version, topic, state = row
    genesis = None
    if topic in GENESIS_TYPES and stream == LEDGER_STREAM and version == 1:
        try:
            body = json.loads(state)
            genesis = EVENT_TYPES[topic].model_validate(
                {**body["payload"], "stream": stream, "version": version, "recorded_at": body["recorded_at"]})
        except (ValueError, KeyError, TypeError):  # pydantic's ValidationError is a ValueError
            genesis = None
    if genesis is None or genesis.genesis_digest != GENESIS_DIGEST or genesis.chain != CHAIN_ALGORITHM:
        return ChainBreak(1, "position 1 is not the LedgerCreated genesis event of this chain")
    return None


def _counted(rows: Any, progress: Progress) -> Any:
    for row in rows:
        progress(row[0])
        yield row


def verify(ctx: Context) -> int:
    anchor = _read_anchor(ctx.args.anchor) if ctx.args.anchor else None
    try:
        doc = verify_ledger(ctx, anchor=anchor)
    except VerificationFailed as e:
        if ctx.json:
            emit(True, {"ok": False, "error": {"code": e.code, "message": e.message}}, None)
        raise
    if anchor is not None:
        doc["anchor"] = {"position": anchor.position, "digest": anchor.digest}
    emit(ctx.json, doc, f"ok: {doc['events']} events, chain intact; head {doc['head']['position']} {doc['head']['digest']}")
    return 0


def replay(ctx: Context) -> int:
    """Verify, rebuild every projection into a fresh file and compare; --apply finishes pending intents."""
    from ..adapters.reader import head_position

    a = ctx.args
    if a.apply and a.until:
        raise BadInput("usage", "--apply drives intents at the head of the ledger; it cannot be combined with --until")
    head = head_position(ctx.read_ledger())
    if a.until and a.until > head:
        raise NotFound("position-not-found", f"position {a.until} is past the end of the ledger ({head})")
    _rebuild_views_cut_off(ctx)
    checked = verify_ledger(ctx, until=a.until)
    doc: dict[str, Any] = {"verified": checked, **_rebuild_and_compare(ctx, a.until, checked["events"])}
    if a.apply:
        doc.update(_apply_pending(ctx))
    lines = [f"ok: chain intact up to {checked['head']['position']}; projections rebuilt to {doc['rebuilt_position']}"]
    if doc.get("drift"):
        lines.append(f"projections differed from the ledger in: {', '.join(doc['drift'])}; rebuilt in place")
    if doc.get("cursor_repaired"):
        lines.append(f"the effector's cursor was past pending intent(s) {', '.join(doc['cursor_repaired']['skipped'])}; "
                     "moved back")
    lines += [f"intent {r['intent_id']} (position {r['intent_position']}): {r['outcome']}" for r in doc.get("applied", [])]
    lines += [f"still pending: intent {p['intent_id']} (position {p['position']}): {shown(p['reason'] or 'not yet observed')}"
              for p in doc.get("pending", [])]
    emit(ctx.json, doc, "\n".join(lines))
    if doc.get("drift"):
        raise VerificationFailed("projection-drift", f"projections differed in {', '.join(doc['drift'])}; rebuilt from the ledger")
    if doc.get("cursor_repaired"):
        raise VerificationFailed("effector-cursor-drift",
                                 f"the effector's cursor skipped pending intent(s) {', '.join(doc['cursor_repaired']['skipped'])}; "
                                 "moved back and driven")
    if doc.get("pending"):
        named = ", ".join(f"{p['intent_id']} ({p['reason'] or 'not yet observed'})" for p in doc["pending"][:5])
        more = f" and {len(doc['pending']) - 5} more" if len(doc["pending"]) > 5 else ""
        raise OutcomeUnknown("intents-pending", f"{len(doc['pending'])} intent(s) still pending: {named}{more}; "
                                                "replay again later")
    return 0


def _apply_pending(ctx: Context) -> dict[str, Any]:
    """Drive every intent the chain says is pending, whatever the cursor says; report what is left."""
    ledger = ctx.ledger
    result: dict[str, Any] = {}
    cursor = ledger.effector_cursor()
    skipped = [p for p in ledger.pending_intents(after=0) if p.position <= cursor]
    if skipped:
        ledger.rewind_effector_cursor(skipped[0].position - 1)
        result["cursor_repaired"] = {"was": cursor, "now": skipped[0].position - 1,
                                     "skipped": [p.intent.intent_id for p in skipped]}
    results = ctx.effector.run_pending(after=0, force=True)
    ctx.update_views()
    result["applied"] = [{"intent_id": r.intent_id, "intent_position": r.intent_position, "outcome": r.outcome,
                          "position": r.position, "reason": r.reason} for r in results]
    result["pending"] = [{"intent_id": p.intent.intent_id, "type": p.intent.type_name(), "position": p.position,
                          "reason": getattr(p.last_unknown, "reason", None),
                          "retry_at": getattr(p.last_unknown, "retry_at", None)}
                         for p in ledger.pending_intents(after=0)]
    return result


def _rebuild_views_cut_off(ctx: Context) -> None:
    """Views remember the head they last saw: if the ledger no longer holds it, rebuild them and say so."""
    import sqlite3

    from ..adapters.projector import catch_up, open_views, views_anchor_break
    from ..domain.errors import DocketError

    conn = ctx.read_ledger()
    if not ctx.paths.views.is_file():
        return
    try:
        views = open_views(ctx.paths.views)
    except (OSError, sqlite3.Error, DocketError):
        return  # nothing to compare with: replay builds the views anew (or in memory)
    try:
        broken = views_anchor_break(conn, views)
        if broken is not None:
            views.ensure_schema(reset=True)
            catch_up(conn, views)
    finally:
        views.conn.close()
    if broken is not None:
        raise broken


def _rebuild_and_compare(ctx: Context, until: int | None, events: int) -> dict[str, Any]:
    """Rebuild the views from position 1 in a fresh file; compare with the current views.

    Drifted current views are reset and rebuilt in place. A reader uses views only
    when their recorded position and digest match the ledger's head (otherwise
    it catches them up itself), so nobody shows a half-rebuilt state.
    """
    import tempfile

    from ..adapters.projector import catch_up, open_views
    from ..projections.views import READ_MODELS

    conn = ctx.read_ledger()
    with tempfile.TemporaryDirectory(prefix="docket-replay-", dir=ctx.paths.views.parent) as folder:
        rebuilt = open_views(Path(folder) / "views.sqlite")
        progress = Progress("rebuilding", events)
        try:
            catch_up(conn, rebuilt, until=until, progress=progress)
        finally:
            progress.close()
        result: dict[str, Any] = {"rebuilt_position": rebuilt.position()}
        if until is not None:
            result["tables"] = {m.TABLE: len(rebuilt.table_rows(m.TABLE)) for m in READ_MODELS}
        else:
            current = ctx.views()
            result["drift"] = [m.TABLE for m in READ_MODELS if current.table_rows(m.TABLE) != rebuilt.table_rows(m.TABLE)]
            if result["drift"]:
                current.ensure_schema(reset=True)
                catch_up(conn, current)
        rebuilt.conn.close()
    return result


def schema(ctx: Context) -> int:
    from ..domain.events import EVENT_TYPES

    if ctx.args.markdown:
        from .events_doc import render

        emit(ctx.json, {"markdown": render()}, render())
        return 0
    doc = {name: cls.model_json_schema() for name, cls in EVENT_TYPES.items()}
    emit(ctx.json, doc, json.dumps(doc, indent=2, sort_keys=True))
    return 0


def completion(ctx: Context) -> int:
    from .completion import script

    text = script(ctx.args.shell)
    emit(ctx.json, {"shell": ctx.args.shell, "script": text}, text)
    return 0
