"""docket init / log / verify / replay / schema / completion."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ..domain.errors import BadInput, NotFound, OutcomeUnknown, VerificationFailed
from .context import Context
from .output import Progress, emit


def init(ctx: Context) -> int:
    from ..adapters.ledger import Ledger

    ledger = Ledger(ctx.paths.ledger)
    try:
        created = ledger.initialise(ctx.clock.now())
    finally:
        ledger.close()
    ctx.views()
    doc = {"created": created, "ledger": str(ctx.paths.ledger), "views": str(ctx.paths.views)}
    emit(ctx.json, doc, f"{'created' if created else 'already have'} ledger {ctx.paths.ledger}")
    return 0


def _event_doc(row: tuple[int, str, int, str, bytes]) -> dict[str, Any]:
    position, stream, version, type_, state = row
    body = json.loads(state)
    return {"position": position, "stream": stream, "version": version, "type": type_,
            "recorded_at": body["recorded_at"], "payload": body["payload"]}


def _human_event(doc: dict[str, Any]) -> str:
    payload = json.dumps(doc["payload"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return f"{doc['position']:>8}  {doc['recorded_at']}  {doc['type']:<24} {doc['stream']}  {payload}"


def log(ctx: Context) -> int:
    from ..adapters.reader import read_events
    from ..domain.events import EVENT_TYPES

    a = ctx.args
    topics: list[str] = []
    if a.type:
        topics = [t for t in EVENT_TYPES if t == a.type or t.split(".v")[0] == a.type]
        if not topics:
            raise BadInput("unknown-event-type", f"no event type {a.type!r}; 'docket schema' lists them")
    conn = ctx.read_ledger()

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


def _read_anchor(path: str) -> Any:
    from ..domain.chain import ChainHead

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound("anchor-not-found", f"no anchor file {path}") from None
    except (OSError, ValueError) as e:
        raise BadInput("bad-anchor", f"{path} is not a JSON anchor: {e}") from None
    head = doc.get("head", doc) if isinstance(doc, dict) else None
    if not (isinstance(head, dict) and isinstance(head.get("position"), int) and isinstance(head.get("digest"), str)):
        raise BadInput("bad-anchor", f"{path} needs a 'position' (integer) and a 'digest' (hex), at the top or under 'head'")
    return ChainHead(head["position"], head["digest"])


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
    return {"ok": True, "events": head.position, "head": {"position": head.position, "digest": head.digest},
            "algorithm": CHAIN_ALGORITHM}


def _genesis_break(conn: Any) -> Any:
    """Position 1 must be the LedgerCreated event that fixes this chain's genesis digest."""
    from ..domain.chain import CHAIN_ALGORITHM, GENESIS_DIGEST, ChainBreak

    row = conn.execute("SELECT topic, state FROM stored_events WHERE rowid = 1").fetchone()
    if row is None:
        raise NotFound("no-ledger", "the ledger holds no events; run 'docket init' first")
    try:
        payload = json.loads(row[1])["payload"] if row[0] == "LedgerCreated.v1" else {}
    except (ValueError, KeyError, TypeError):
        payload = {}
    if payload.get("genesis_digest") != GENESIS_DIGEST or payload.get("chain") != CHAIN_ALGORITHM:
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
    checked = verify_ledger(ctx, until=a.until)
    doc: dict[str, Any] = {"verified": checked, **_rebuild_and_compare(ctx, a.until, checked["events"])}
    if a.apply:
        results = ctx.effector.run_pending()
        ctx.views()
        doc["applied"] = [{"intent_id": r.intent_id, "intent_position": r.intent_position,
                           "outcome": r.outcome, "position": r.position} for r in results]
    lines = [f"ok: chain intact up to {checked['head']['position']}; projections rebuilt to {doc['rebuilt_position']}"]
    if doc.get("drift"):
        lines.append(f"projections differed from the ledger in: {', '.join(doc['drift'])}; rebuilt in place")
    lines += [f"intent {r['intent_id']} (position {r['intent_position']}): {r['outcome']}" for r in doc.get("applied", [])]
    emit(ctx.json, doc, "\n".join(lines))
    if doc.get("drift"):
        raise VerificationFailed("projection-drift", f"projections differed in {', '.join(doc['drift'])}; rebuilt from the ledger")
    unknown = [r for r in doc.get("applied", []) if r["outcome"] == "IntentOutcomeUnknown.v1"]
    if unknown:
        raise OutcomeUnknown("outcome-unknown", f"intent {unknown[0]['intent_id']}: outcome still unknown; replay again later")
    return 0


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

    emit(ctx.json, {"shell": ctx.args.shell, "script": script(ctx.args.shell)}, script(ctx.args.shell))
    return 0
