"""The ledger connections `docket go` works through: one Session per thread, and the RunDriver of the calling
thread, which also reads the ledger and its views and catches the views up after what it records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...world.clock import Clock
from ..kernel.ledger import Ledger

if TYPE_CHECKING:
    from ....projections.views import Views
    from ..kernel.ports import EffectorPort, LedgerReader

__all__ = ["RunDriver", "Session"]


@dataclass
class Session:
    """A ledger connection with its clock and effector, for one thread."""

    ledger: Ledger
    clock: Clock
    effector: EffectorPort
    close: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class RunDriver:
    """What starts, supervises, recovers and delivers runs from the calling thread.

    ``reader`` and ``views`` open their connections when first asked (the caller keeps and closes them);
    ``update_views`` brings the views file up to the ledger's head, and is called after each step that records."""

    ledger: Ledger
    clock: Clock
    effector: EffectorPort
    ledger_path: Path
    lock_timeout: int
    reader: Callable[[], LedgerReader]
    views: Callable[..., Views]  # views(writable=False): the views at the ledger's head
    update_views: Callable[[], None]

    @property
    def docket_dir(self) -> Path:
        return self.ledger_path.parent

    def open_session(self) -> Session:
        """A new connection to the ledger, for another thread."""
        from ..kernel.effector import Effector

        # one stream cache per process: what one thread folded, another folds on from
        ledger = Ledger(self.ledger_path, url=self.ledger.url, lock_timeout=self.lock_timeout,
                        streams=self.ledger.streams)
        ledger.watch = self.ledger.watch  # one watch per process: each connection tells it what it wrote
        return Session(ledger, self.clock, Effector(ledger, self.clock, home=getattr(self.effector, "home", None)),
                       ledger.close)
