"""Replay: rebuild every projection from the ledger and compare, and drive whatever the chain says is pending."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.kernel.errors import DocketError
from .projector import catch_up, open_views, views_anchor_break
from .view_freshness import Warn, fresh_views

if TYPE_CHECKING:
    from .effector import Effector
    from .ledger import Ledger
    from .ports import LedgerReader

__all__ = ["apply_pending", "rebuild_and_compare", "rebuild_views_cut_off"]


def rebuild_views_cut_off(ledger: LedgerReader, views_path: Path) -> None:
    """Views remember the head they last saw: if the ledger no longer holds it, rebuild them and raise why."""
    if not views_path.is_file():
        return
    try:
        views = open_views(views_path)
    except (OSError, DocketError):
        return  # nothing to compare with: replay builds the views anew (or in memory)
    try:
        broken = views_anchor_break(ledger, views)
        if broken is not None:
            views.ensure_schema(reset=True)
            catch_up(ledger, views)
    finally:
        views.conn.close()
    if broken is not None:
        raise broken


def rebuild_and_compare(ledger: LedgerReader, views_path: Path, *, until: int | None, timeout: float,
                        warn: Warn, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Rebuild the views from position 1 in a fresh file beside them; compare with the current views.

    Drifted current views are reset and rebuilt in place. A reader uses views only
    when their recorded position and digest match the ledger's head (otherwise
    it catches them up itself), so nobody shows a half-rebuilt state. With
    ``until``, nothing is compared: the rebuilt tables' row counts are reported.
    """
    from ....projections.views import READ_MODELS

    with tempfile.TemporaryDirectory(prefix="docket-replay-", dir=views_path.parent) as folder:
        rebuilt = open_views(Path(folder) / "views.sqlite")
        try:
            catch_up(ledger, rebuilt, until=until, progress=progress)
            result: dict[str, Any] = {"rebuilt_position": rebuilt.position()}
            if until is not None:
                result["tables"] = {m.TABLE: len(rebuilt.table_rows(m.TABLE)) for m in READ_MODELS}
                return result
            current = fresh_views(ledger, views_path, timeout=timeout, warn=warn, writable=True)
            try:
                result["drift"] = [m.TABLE for m in READ_MODELS
                                   if current.table_rows(m.TABLE) != rebuilt.table_rows(m.TABLE)]
                if result["drift"]:
                    current.ensure_schema(reset=True)
                    catch_up(ledger, current)
            finally:
                current.conn.close()
        finally:
            rebuilt.conn.close()
    return result


def apply_pending(ledger: Ledger, effector: Effector, *, after_driving: Callable[[], None] = lambda: None,
                  settle: Callable[[], list[Any]] | None = None) -> dict[str, Any]:
    """Drive every intent the chain says is pending, whatever the effector's cursor says; report what is left.

    A cursor found past a pending intent is moved back first ("cursor_repaired").
    ``after_driving`` runs once every intent has been driven, before what is
    still pending is read (the CLI brings its views up to date there).
    """
    result: dict[str, Any] = {}
    cursor = ledger.effector_cursor()
    skipped = [p for p in ledger.pending_intents(after=0) if p.position <= cursor]
    if skipped:
        ledger.rewind_effector_cursor(skipped[0].position - 1)
        result["cursor_repaired"] = {"was": cursor, "now": skipped[0].position - 1,
                                     "skipped": [p.intent.intent_id for p in skipped]}
    results = effector.run_pending(after=0, force=True)
    after_driving()
    if settle is not None:
        result["settled"] = settle()
        after_driving()
    result["applied"] = [{"intent_id": r.intent_id, "intent_position": r.intent_position, "outcome": r.outcome,
                          "position": r.position, "reason": r.reason} for r in results]
    result["pending"] = [{"intent_id": p.intent.intent_id, "type": p.intent.type_name(), "position": p.position,
                          "reason": getattr(p.last_unknown, "reason", None),
                          "retry_at": getattr(p.last_unknown, "retry_at", None)}
                         for p in ledger.pending_intents(after=0)]
    return result
