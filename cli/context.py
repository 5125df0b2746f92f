"""Bootstrap: the one place that builds adapters from options and environment.

Heavy modules (pydantic, eventsourcing, dulwich, sqlite-utils) are imported
only when a command needs them, so that read-only commands start fast.
"""

from __future__ import annotations

import argparse
import sqlite3
from contextlib import ExitStack
from functools import cached_property
from typing import TYPE_CHECKING

from ..adapters.paths import LedgerPaths, resolve_paths
from ..domain.errors import NotFound

if TYPE_CHECKING:
    from ..adapters.clock import Clock
    from ..adapters.effector import Effector
    from ..adapters.ledger import Ledger
    from ..projections.views import Views


class Context:
    """What one command needs, built on first use and closed when it ends."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.json: bool = bool(getattr(args, "json", False))
        self._resources = ExitStack()
        self._reader: sqlite3.Connection | None = None

    @cached_property
    def paths(self) -> LedgerPaths:
        return resolve_paths(getattr(self.args, "ledger", None))

    def require_ledger_file(self) -> None:
        if not self.paths.ledger.exists():
            raise NotFound("no-ledger", f"no docket ledger at {self.paths.ledger}; run 'docket init' first")

    @cached_property
    def ledger(self) -> Ledger:
        from ..adapters.ledger import Ledger

        self.require_ledger_file()
        ledger = Ledger(self.paths.ledger)
        self._resources.callback(ledger.close)
        ledger.require_initialised()
        return ledger

    @cached_property
    def clock(self) -> Clock:
        from ..adapters.clock import clock_from_env

        return clock_from_env()

    @cached_property
    def effector(self) -> Effector:
        from ..adapters.effector import Effector

        return Effector(self.ledger, self.clock)

    def read_ledger(self) -> sqlite3.Connection:
        """A read-only connection to the ledger file (kept for the command's life)."""
        from ..adapters.reader import read_only

        if self._reader is None:
            self.require_ledger_file()
            reader = self._resources.enter_context(read_only(self.paths.ledger))
            if reader.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stored_events'").fetchone() is None:
                raise NotFound("no-ledger", f"{self.paths.ledger} is not a docket ledger; run 'docket init' first")
            self._reader = reader
        return self._reader

    def views(self) -> Views:
        """The views, caught up with the ledger."""
        from ..adapters.projector import catch_up, open_views

        reader = self.read_ledger()  # before creating views beside a file that is not a ledger
        views = open_views(self.paths.views)
        self._resources.callback(views.conn.close)
        catch_up(reader, views)
        return views

    def close(self) -> None:
        self._resources.close()
