"""Kept copies of the views at past positions, so `status --at` starts near the point it asks for.

When the views file passes a multiple of INTERVAL, its read models (small: they
grow with runs, workers and leases, not with events) are copied into
``<views>.checkpoints/<position>.sqlite``. At most LIMIT files are kept: past
that, the one whose removal leaves the smallest gap goes, so they stay spread
over the ledger. A checkpoint is used only if the ledger still holds the digest
it was taken at and the read models' schema is the same; it is disposable, like
the views, and a rebuild of the views from position 1 starts them afresh.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ....projections.views import Views, schema_signature
from ...world.files.files import create_private_file, own_folder

if TYPE_CHECKING:
    from .ports import LedgerReader

__all__ = ["INTERVAL", "LIMIT", "checkpoint_folder", "clear", "keep", "positions", "start_from_checkpoint"]

INTERVAL = 10_000
LIMIT = 128


def checkpoint_folder(views_path: Path) -> Path:
    return views_path.with_name(views_path.stem + ".checkpoints")


def positions(folder: Path) -> list[int]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(name[:-7]) for name in names if name.endswith(".sqlite") and name[:-7].isdigit())


def clear(folder: Path) -> None:
    for position in positions(folder):
        (folder / f"{position}.sqlite").unlink(missing_ok=True)


def keep(views: Views, folder: Path) -> int:
    """Copy the views' read models as they stand now into the folder; returns the position copied."""
    own_folder(folder.parent, folder)
    partial = folder / f"partial-{os.getpid()}.sqlite"
    partial.unlink(missing_ok=True)
    create_private_file(partial)
    position = views.copy_read_models_into(str(partial))
    os.replace(partial, folder / f"{position}.sqlite")
    _thin(folder)
    return position


def _thin(folder: Path) -> None:
    kept = positions(folder)
    while len(kept) > LIMIT:
        # never the newest; among the others, the one whose neighbours are closest together
        bounds = [0, *kept]
        i = min(range(1, len(kept)), key=lambda k: bounds[k + 1] - bounds[k - 1])
        (folder / f"{kept[i - 1]}.sqlite").unlink(missing_ok=True)
        del kept[i - 1]


def start_from_checkpoint(ledger: LedgerReader, views: Views, folder: Path, *, until: int | None = None,
                          until_time: str | None = None) -> int:
    """Fill empty views from the latest usable checkpoint at or before until (or until_time); returns its position.

    0 when there is none: the views stay empty and are built from position 1.
    Ledger time never runs backwards, so a checkpoint whose own event is no later
    than until_time holds no event past it.
    """
    for position in reversed(positions(folder)):
        if until is not None and position > until:
            continue
        if until_time is not None and _recorded_at(ledger, position) > until_time:
            continue
        if _restore(ledger, views, folder / f"{position}.sqlite", position):
            return position
    return 0


def _restore(ledger: LedgerReader, views: Views, path: Path, position: int) -> bool:
    if not path.is_file():
        return False  # thinned by another process meanwhile (ATTACH would create it)

    def taken_here(meta: dict[str, str]) -> bool:
        return (meta.get("schema"), meta.get("position"), meta.get("genesis"), meta.get("digest")) == (
            schema_signature(), str(position), ledger.digest_at(1), ledger.digest_at(position))

    return views.restore_read_models_from(str(path), taken_here)


def _recorded_at(ledger: LedgerReader, position: int) -> str:
    import json

    row = ledger.event_at(position)
    return "\uffff" if row is None else json.loads(row[4])["recorded_at"]  # past the end: never before any time
