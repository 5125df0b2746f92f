"""How fresh the views a command reads are: one rule for when views.sqlite can be used as it is.

At the ledger's head: the file as it is when it is current, else caught up
first; after a recorded event, the file brought up to it; at an earlier point,
rebuilt in memory. The views database itself (its tables and the position they
reflect) is ``projections.views``; applying events to it is ``projector``.

The fast path (the file already reflects the ledger's head) needs the standard
library only, so that ``docket status`` starts fast; catching up imports the
projector.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain.kernel.errors import BadInput, StorageFailed
from ....projections.views import Views, open_read_only, schema_signature
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from .ports import LedgerReader

__all__ = ["current_views", "fresh_views", "update_views", "views_at"]

Warn = Callable[[str, str], None]


def current_views(ledger: LedgerReader, path: Path) -> Views | None:
    """The views file, read-only, if it already reflects the ledger's head (same schema, position and digest)."""
    if not path.exists() or (views := open_read_only(str(path))) is None:
        return None
    try:
        meta = views.meta()
        head = ledger.chain_head()
    except StorageFailed:
        views.conn.close()
        return None
    if meta.get("schema") != schema_signature() or head is None \
            or (str(head.position), head.digest) != (meta.get("position"), meta.get("digest")):
        views.conn.close()
        return None
    return views


def fresh_views(ledger: LedgerReader, path: Path, *, timeout: float, warn: Warn,
                writable: bool = False) -> Views:
    """Views at the ledger's head: the file as it is when current, else caught up first.

    When the file cannot be opened or written (read-only mount, locked, disk
    full, not a views file), they are built in memory from the ledger, with a
    warning. ``writable``: never the read-only file (the caller rebuilds them).
    The caller closes the returned views' connection.
    """
    if not writable and (views := current_views(ledger, path)) is not None:
        return views
    from .projector import open_views

    try:
        return _caught_up(open_views(path, timeout=timeout), ledger)
    except OSError as e:
        warn("views-unavailable", f"cannot use {path} ({e}); using views built in memory")
    except StorageFailed as e:
        warn("views-unavailable", f"cannot use {path} ({e.message}); using views built in memory")
    except BadInput as e:
        warn("views-unavailable", f"cannot use {path} ({e.code}: {e.message}); using views built in memory")
    return _caught_up(open_views(":memory:"), ledger)


def update_views(ledger: LedgerReader, path: Path, *, timeout: float, warn: Warn) -> None:
    """After a recorded event: bring the views file up to it, or warn that it will catch up later.

    The event is committed; a views failure (locked, disk full, damaged) must not
    turn a recorded command into a failed one that invites a retry.
    """
    from .projector import open_views

    try:
        _caught_up(open_views(path, timeout=timeout), ledger).conn.close()
    except (OSError, StorageFailed, BadInput) as e:
        warn("views-behind", f"the event is recorded, but {path} could not be updated "
                             f"({e.message if isinstance(e, StorageFailed) else e}); "
                             "the views catch up on the next command")


def _caught_up(views: Views, ledger: LedgerReader) -> Views:
    """views brought up to the ledger's head; closed if that fails."""
    from .projector import catch_up

    try:
        catch_up(ledger, views)
    except BaseException:
        views.conn.close()
        raise
    return views


def views_at(ledger: LedgerReader, at: str, checkpoints: Path | None = None) -> tuple[Views, str | None]:
    """Views rebuilt in memory up to a ledger position or an ISO-8601 time, and the ledger's time there.

    They start from the latest usable checkpoint in the folder checkpoints, if any, else from position 1.
    The time is None when nothing was recorded by then. The caller closes the views' connection.
    """
    import json

    from ....domain.kernel.errors import NotFound
    from ....domain.kernel.values import parse_position, parse_time
    from .checkpoints import start_from_checkpoint
    from .projector import catch_up, open_views

    views = open_views(":memory:")
    try:
        if at.isascii() and at.isdigit():
            if (until := parse_position(at)) > (head := ledger.head_position()):
                raise NotFound(Code.POSITION_NOT_FOUND, f"position {at} is past the end of the ledger ({head})")
            if checkpoints is not None:
                start_from_checkpoint(ledger, views, checkpoints, until=until)
            position = catch_up(ledger, views, until=until)
            row = ledger.event_at(position)
            return views, json.loads(row[4])["recorded_at"] if row else None
        moment = parse_time(at)
        if checkpoints is not None:
            start_from_checkpoint(ledger, views, checkpoints, until_time=moment)
        catch_up(ledger, views, until_time=moment)
        return views, moment
    except BaseException:
        views.conn.close()
        raise
