"""Keeps views.sqlite caught up with the ledger, and rebuilds it from scratch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain.kernel.errors import StorageFailed, VerificationFailed
from ....projections.views import Views, connect_views
from . import checkpoints
from ...world import faults
from ...world.files.files import create_private_file
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from .ports import LedgerReader

__all__ = ["catch_up", "open_views", "views_anchor_break"]

BATCH = 5000


def open_views(path: Path | str, *, timeout: float = 60) -> Views:
    """Open (creating if needed) a views database with every read model's tables.

    Views are disposable: a file that is not an SQLite database at all is
    removed and built again from the ledger. A symlink or a file that is not a
    regular file is refused (BadInput), never followed or changed.
    """
    if str(path) == ":memory:":
        return connect_views(":memory:", timeout)
    path = Path(path)
    create_private_file(path)
    try:
        return connect_views(str(path), timeout)
    except StorageFailed as e:
        if "not a database" not in e.message and "malformed" not in e.message:
            raise
        for damaged in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            damaged.unlink(missing_ok=True)
        create_private_file(path)
        return connect_views(str(path), timeout)


def catch_up(
    ledger: LedgerReader,
    views: Views,
    *,
    until: int | None = None,
    until_time: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Apply every ledger event the views have not seen (up to until), in batches.

    Views of another ledger (their genesis digest differs) are rebuilt from
    scratch. Views of this ledger whose head it no longer holds are a free
    anchor: the ledger was cut or rewritten, and that is a VerificationFailed
    ('docket replay' reports it and rebuilds them).
    """
    broken = views_anchor_break(ledger, views)
    if broken is not None:
        raise broken
    position = views.position()
    if position and views.genesis() != ledger.digest_at(1):
        views.ensure_schema(reset=True)
        position = 0
    folder = checkpoints.checkpoint_folder(Path(views.path)) if views.path is not None else None
    if folder is not None and position == 0:
        checkpoints.clear(folder)  # built from position 1: its checkpoints are made again on the way
    while True:
        batch = []
        # a batch ends at a multiple of the checkpoint interval, so a file's checkpoints fall exactly there
        size = BATCH if folder is None else min(BATCH, checkpoints.INTERVAL - position % checkpoints.INTERVAL)
        for row in ledger.events(after=position, until=until):
            if until_time is not None and _recorded_at(row[4]) > until_time:
                until = row[0] - 1
                break
            batch.append(row)
            if len(batch) == size:
                break
        if not batch:
            return views.position()
        before = position
        position = views.apply(batch, ledger.digest_at,
                               before_commit=lambda: faults.crash_point("projection:before-commit"))
        if folder is not None and position // checkpoints.INTERVAL > before // checkpoints.INTERVAL:
            try:
                checkpoints.keep(views, folder)
            except (OSError, StorageFailed):
                pass  # only a head start for 'status --at': the views themselves are up to date
        if progress:
            progress(position)


def views_anchor_break(ledger: LedgerReader, views: Views) -> VerificationFailed | None:
    """The views remember (position, digest) of this ledger: is that head still in it?"""
    position, digest = views.head()
    if not position or views.genesis() != ledger.digest_at(1):
        return None  # empty views, or another ledger's
    if position > (head := ledger.head_position()):
        return VerificationFailed(Code.LEDGER_CUT, f"position {position}: the views saw the ledger reach it, but the "
                                                f"ledger now ends at {head}; events were cut from its tail "
                                                "(run 'docket replay' to rebuild the views from what is left)")
    if (found := ledger.digest_at(position)) != digest:
        return VerificationFailed(Code.LEDGER_REWRITTEN, f"position {position}: the ledger's digest "
                                                      f"({found[:16] or 'none'}) differs from the one the views "
                                                      f"recorded there ({digest[:16] or 'none'}); the ledger was "
                                                      "rewritten (run 'docket replay' to rebuild the views from it)")
    return None


def _recorded_at(state: bytes) -> str:
    import json

    return json.loads(state)["recorded_at"]
