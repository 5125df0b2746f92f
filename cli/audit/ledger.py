"""docket init / verify / replay / schema (log has its own module, cli/supervise/log_command.py; completion
cli/completion.py)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ...domain.kernel.errors import BadInput, NotFound, OutcomeUnknown, VerificationFailed
from ..console.context import Context
from ..console.output import Progress, emit, shown
from ..console.parsing import command, group, position
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ...adapters.service_layer.kernel.ledger import Ledger
    from ...adapters.service_layer.kernel.ports import LedgerReader
    from ...adapters.world.files.paths import LedgerPaths

__all__ = ["add_init", "add_ledger", "add_replay", "add_schema", "add_verify"]


def add_init(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "init", init, common, "create the ledger (idempotent)", "docket init")
    p.add_argument("--join", action="store_true",
                   help="this clone joins the shared ledger (DOCKET_DATABASE_URL) that a clone of the same "
                        "repository created: it takes that ledger's repository id (refused if it has another)")


def add_verify(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "verify", verify, common, "recompute the hash chain and name the first bad position",
                "docket verify --json > anchor.json; docket verify --anchor anchor.json")
    p.add_argument("--anchor", metavar="FILE", help="JSON with the position and digest the ledger must still hold, "
                                                    "or a bundle from 'docket export': also its Merkle root")


def add_replay(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "replay", replay, common,
                "verify, rebuild every projection and compare; --apply drives pending intents", "docket replay --apply")
    p.add_argument("--until", metavar="POSITION", type=position, help="stop at this position")
    p.add_argument("--apply", action="store_true", help="drive every pending intent to its outcome")


def add_ledger(nouns: Any, common: argparse.ArgumentParser) -> None:
    ledger = group(nouns, "ledger", "move the ledger between stores", "docket ledger copy --to ledger-copy.sqlite")
    p = command(ledger, "copy", ledger_copy, common,
                "copy this ledger, every event as stored, into an empty PostgreSQL database (postgresql://...) or "
                "SQLite file; the chain is verified on both sides, and a stopped copy resumes",
                "docket ledger copy --to ledger-copy.sqlite")
    p.add_argument("--to", metavar="URL_OR_FILE", required=True,
                   help="a postgresql:// URL, or the path of a new SQLite ledger file")


def ledger_copy(ctx: Context) -> int:
    """Copy the ledger this command reads (--ledger, DOCKET_DATABASE_URL ...) to --to."""
    from pathlib import Path

    from ...adapters.service_layer.kernel.ledger import Ledger
    from ...adapters.service_layer.kernel.ledger_copy import copy_ledger
    from ...adapters.world.files.paths import LedgerPaths
    from ...adapters.world.ledger.database_url import redacted

    to = ctx.args.to
    if "\x00" in to:
        raise BadInput(Code.BAD_LEDGER_PATH, "--to holds a NUL byte")
    url = to if to.startswith(("postgresql://", "postgres://")) else None
    if url is None:
        path = Path(to).expanduser().absolute()
        if path.is_dir() or not path.parent.is_dir():
            raise BadInput(Code.BAD_LEDGER_PATH, f"{shown(path)} must name a file in a folder that exists")
        target_paths = LedgerPaths(ledger=path, views=path.with_name(path.stem + ".views.sqlite"))
    else:
        from ...adapters.world.ledger.database_url import postgres_env

        try:
            postgres_env(url, lock_timeout=0)
        except ValueError as e:
            raise BadInput(Code.BAD_DATABASE_URL, str(e)[:300]) from None
        target_paths = LedgerPaths(ledger=ctx.paths.ledger, views=ctx.paths.views, url=url)
    if target_paths.where == ctx.paths.where:
        raise BadInput(Code.SAME_LEDGER, "the ledger cannot be copied onto itself")
    source = ctx.ledger_reader
    target = Ledger(target_paths.ledger, url=url, lock_timeout=ctx.lock_timeout)
    try:
        progress = Progress("copied", total=source.head_position()) if not ctx.json else None
        copied = copy_ledger(source, target, lambda: _reader_of(target_paths),
                             progress=progress)
        if progress is not None:
            progress.close()
    finally:
        target.close()
    doc = {"source": ctx.paths.where, "target": target_paths.where, "copied": copied.copied,
           "resumed_from": copied.resumed_from,
           "head": {"position": copied.head.position, "digest": copied.head.digest}}
    resumed = f" (resumed after position {copied.resumed_from})" if copied.resumed_from else ""
    emit(ctx.json, doc, f"copied {copied.copied} events to {shown(redacted(target_paths.where))}{resumed}; chain "
                        f"verified on both sides: head {copied.head.position} {copied.head.digest}")
    return 0


def _reader_of(paths: LedgerPaths) -> AbstractContextManager[LedgerReader]:
    if paths.url is not None:
        from ...adapters.world.ledger.postgres_reader import postgres_reader

        return postgres_reader(paths.url)
    from ...adapters.world.ledger.reader import ledger_reader

    return ledger_reader(paths.ledger)


def add_schema(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "schema", schema, common, "print the JSON Schema of every event type", "docket schema --json")
    p.add_argument("--markdown", action="store_true", help="render the event catalogue as docs/events.md")


def init(ctx: Context) -> int:
    """Create the ledger, bound to the repository around the working directory (if any)."""
    from ...adapters.world.ledger.identity import ensure_identity

    ledger = ctx.open_ledger()
    created = False
    if ctx.args.join:
        _join(ctx, ledger)
    if not ledger.is_initialised():
        common = ctx.repository
        repository_id = ensure_identity(common) if common is not None else None
        created = ledger.initialise(ctx.clock.now(), repository_id, str(common) if common is not None else None)
    if not created:
        ctx.require_own_repository(ledger)
    ctx.update_views()
    from ..steps.config import write_default_config

    config, config_created = write_default_config()
    where = ctx.paths.where if ctx.paths.url is not None else str(ctx.paths.ledger)
    doc = {"created": created, "ledger": where, "views": str(ctx.paths.views),
           "repository_id": ledger.repository_id, "config": str(config) if config else None,
           "config_created": config_created}
    wrote = f"\nwrote a commented default configuration {shown(config)}" if config_created else ""
    emit(ctx.json, doc, f"{'created' if created else 'already have'} ledger {shown(ctx.paths.ledger) if ctx.paths.url is None else shown(where)}{wrote}")
    return 0


def _join(ctx: Context, ledger: Ledger) -> None:
    """Give this clone the shared ledger's repository id, so that it may record there (create-only: a clone with an
    identity of its own keeps it, and the commands that record refuse it, foreign-ledger)."""
    from ...adapters.world.ledger.identity import adopt_identity
    from ...domain.kernel.errors import BadInput, NotFound

    if ctx.paths.url is None:
        raise BadInput(Code.NOT_SHARED, "--join is for a ledger several machines share (DOCKET_DATABASE_URL or "
                                     "[ledger] url); a file ledger belongs to the repository it is in")
    if not ledger.is_initialised():
        raise NotFound(Code.NO_LEDGER, f"{ctx.paths.where} has no ledger to join yet: run 'docket init' in the clone "
                                    "that starts it")
    common = ctx.require_repository()
    if ledger.repository_id is not None:
        adopt_identity(common, ledger.repository_id)


def _verified(ctx: Context, *, anchor: Any = None, until: int | None = None) -> dict[str, Any]:
    """The chain recomputed (with progress on a terminal); VerificationFailed names the first bad position."""
    from ...adapters.service_layer.kernel.verification import verify_ledger

    reader = ctx.ledger_reader
    progress = Progress("verifying", reader.head_position())
    try:
        return verify_ledger(reader, anchor=anchor, until=until, progress=progress if progress.enabled else None)
    finally:
        progress.close()


def verify(ctx: Context) -> int:
    from ...adapters.service_layer.kernel.verification import read_anchor

    anchor = read_anchor(ctx.args.anchor) if ctx.args.anchor else None
    try:
        doc = _verified(ctx, anchor=anchor)
    except VerificationFailed as e:
        if ctx.json:
            emit(True, {"ok": False, "error": {"code": e.code, "message": e.message}}, None)
        raise
    foreign = _foreign_ledger(ctx)
    if foreign:
        from ..console.output import warn

        doc["foreign_ledger"] = foreign
        warn("foreign-ledger", foreign)
    if anchor is not None:
        doc["anchor"] = {"position": anchor.head.position, "digest": anchor.head.digest}
        if anchor.merkle_root is not None:
            doc["anchor"]["merkle_root"] = anchor.merkle_root
    emit(ctx.json, doc, f"ok: {doc['events']} events, chain intact; head {doc['head']['position']} {doc['head']['digest']}")
    return 0


def _foreign_ledger(ctx: Context) -> str | None:
    """Why the ledger at this repository's own location (neither --ledger nor DOCKET_LEDGER chose it) is another
    repository's (None: it is this one's, or bound to none). Its chain may be intact: an auditor may verify a copy,
    so this is said, not refused; the commands that record refuse it (foreign-ledger)."""
    import os

    from ...adapters.service_layer.kernel.verification import ledger_repository_id
    from ...adapters.world.ledger.identity import identity_mismatch

    if getattr(ctx.args, "ledger", None) or os.environ.get("DOCKET_LEDGER") or ctx.repository is None:
        return None
    mismatch = identity_mismatch(ctx.repository, ledger_repository_id(ctx.ledger_reader))
    return f"{mismatch}: {ctx.paths.ledger} is not this repository's record" if mismatch else None


def replay(ctx: Context) -> int:
    """Verify, rebuild every projection into a fresh file and compare; --apply finishes pending intents."""
    from ...adapters.service_layer.kernel.replay import apply_pending, rebuild_and_compare, rebuild_views_cut_off
    from ..console.output import warn

    a = ctx.args
    if a.apply and a.until:
        raise BadInput(Code.USAGE, "--apply drives intents at the head of the ledger; it cannot be combined with --until")
    reader = ctx.ledger_reader
    head = reader.head_position()
    if a.until and a.until > head:
        raise NotFound(Code.POSITION_NOT_FOUND, f"position {a.until} is past the end of the ledger ({head})")
    rebuild_views_cut_off(reader, ctx.paths.views)
    checked = _verified(ctx, until=a.until)
    progress = Progress("rebuilding", checked["events"])
    try:
        rebuilt = rebuild_and_compare(reader, ctx.paths.views, until=a.until, timeout=ctx.lock_timeout, warn=warn,
                                      progress=progress)
    finally:
        progress.close()
    doc: dict[str, Any] = {"verified": checked, **rebuilt}
    if not a.until:  # snapshots and kept Merkle hashes are derived from the events, like views: recompute, repair
        from ...adapters.service_layer.kernel.ledger_tree import repair_kept_blocks

        ledger = ctx.open_ledger()
        doc["snapshot_drift"] = ledger.snapshot_drift(repair=True)
        repaired = repair_kept_blocks(reader, checked["events"], ledger.keep_merkle_nodes)
        if repaired:
            doc["merkle_drift"] = [{"first": first, "last": last} for first, last in repaired]
    if a.apply:
        from ...adapters.service_layer.use_cases.abandoned_checks import settle_abandoned_checks

        doc.update(apply_pending(ctx.ledger, ctx.effector, after_driving=ctx.update_views,
                                 settle=lambda: settle_abandoned_checks(ctx.ledger, ctx.clock, ctx.effector,
                                                                        ctx.views().conn, stop_orphans=False)))
    if ctx.repository is not None:  # what replay cannot converge, reconcile --apply removes
        doc["stale_locks"] = ctx.effector.ports.inventory.stale_locks(ctx.repository)
    _render_replay(ctx, doc, checked)
    if doc.get("drift"):
        raise VerificationFailed(Code.PROJECTION_DRIFT, f"projections differed in {', '.join(doc['drift'])}; rebuilt from the ledger")
    if doc.get("snapshot_drift"):
        raise VerificationFailed(Code.SNAPSHOT_DRIFT, f"snapshots differed from their events for "
                                                   f"{', '.join(doc['snapshot_drift'])}; recomputed from the ledger")
    if doc.get("merkle_drift"):
        raise VerificationFailed(Code.MERKLE_NODE_DRIFT, f"kept Merkle hashes differed from the chain digests of "
                                                      f"{len(doc['merkle_drift'])} block(s); recomputed")
    if doc.get("cursor_repaired"):
        raise VerificationFailed(Code.EFFECTOR_CURSOR_DRIFT,
                                 f"the effector's cursor skipped pending intent(s) {', '.join(doc['cursor_repaired']['skipped'])}; "
                                 "moved back and driven")
    if doc.get("pending"):
        named = ", ".join(f"{p['intent_id']} ({p['reason'] or 'not yet observed'})" for p in doc["pending"][:5])
        more = f" and {len(doc['pending']) - 5} more" if len(doc["pending"]) > 5 else ""
        raise OutcomeUnknown(Code.INTENTS_PENDING, f"{len(doc['pending'])} intent(s) still pending: {named}{more}; "
                                                "replay again later")
    return 0


def _render_replay(ctx: Context, doc: dict[str, Any], checked: dict[str, Any]) -> None:
    lines = [f"ok: chain intact up to {checked['head']['position']}; projections rebuilt to {doc['rebuilt_position']}"]
    if doc.get("drift"):
        lines.append(f"projections differed from the ledger in: {', '.join(doc['drift'])}; rebuilt in place")
    if doc.get("merkle_drift"):
        ranges = ", ".join(f"{b['first']}..{b['last']}" for b in doc["merkle_drift"])
        lines.append(f"kept Merkle hashes differed from the chain digests of positions {ranges}; recomputed")
    if doc.get("snapshot_drift"):
        lines.append(f"snapshots differed from their events for: {', '.join(doc['snapshot_drift'])}; recomputed")
    if doc.get("cursor_repaired"):
        lines.append(f"the effector's cursor was past pending intent(s) {', '.join(doc['cursor_repaired']['skipped'])}; "
                     "moved back")
    lines += [f"intent {r['intent_id']} (position {r['intent_position']}): {r['outcome']}" for r in doc.get("applied", [])]
    lines += [f"still pending: intent {p['intent_id']} (position {p['position']}): {shown(p['reason'] or 'not yet observed')}"
              for p in doc.get("pending", [])]
    lines += [f"stale lock: {shown(lock)} (a writer killed mid-write left it; 'docket reconcile --apply' removes it)"
              for lock in doc.get("stale_locks", [])]
    emit(ctx.json, doc, "\n".join(lines))


def schema(ctx: Context) -> int:
    from ...domain.events import EVENT_TYPES

    if ctx.args.markdown:
        from .events_doc import render

        emit(ctx.json, {"markdown": render()}, render())
        return 0
    doc = {name: cls.model_json_schema() for name, cls in EVENT_TYPES.items()}
    emit(ctx.json, doc, json.dumps(doc, indent=2, sort_keys=True))
    return 0
