"""Bootstrap: the one place that builds adapters from options and environment.

Heavy modules (pydantic, eventsourcing, dulwich, sqlite-utils) are imported
only when a command needs them, so that read-only commands start fast.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from contextlib import ExitStack
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..adapters.paths import LedgerPaths, resolve_paths
from ..domain.errors import BadInput, NotFound, Refused

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
        self._ledger_file_checked = False

    @cached_property
    def paths(self) -> LedgerPaths:
        return resolve_paths(getattr(self.args, "ledger", None))

    def require_ledger_file(self) -> None:
        """The ledger file exists and is what it claims to be; warn once if others could read or replace it."""
        from ..adapters.files import check_ledger_file, exposure_warnings
        from .output import warn

        if not os.path.lexists(self.paths.ledger):
            raise NotFound("no-ledger", f"no docket ledger at {self.paths.ledger}; run 'docket init' first")
        if not self._ledger_file_checked:
            if check_ledger_file(self.paths.ledger):
                for code, message in exposure_warnings(self.paths.ledger):
                    warn(code, message)
            self._ledger_file_checked = True

    @cached_property
    def lock_timeout(self) -> int:
        """Seconds to wait for the ledger's write lock: DOCKET_LOCK_TIMEOUT, else 60."""
        from ..adapters.ledger import DEFAULT_LOCK_TIMEOUT

        text = os.environ.get("DOCKET_LOCK_TIMEOUT", "").strip()
        if not text:
            return DEFAULT_LOCK_TIMEOUT
        if not text.isdigit() or not 1 <= int(text[:8]) <= 86_400 or len(text) > 8:
            raise BadInput("bad-environment", f"DOCKET_LOCK_TIMEOUT={text[:40]!r} is not a whole number of seconds "
                                              "from 1 to 86400")
        return int(text)

    def open_ledger(self) -> Ledger:
        """The ledger file opened for writing (created if missing), not yet checked."""
        from ..adapters.ledger import Ledger

        ledger = Ledger(self.paths.ledger, lock_timeout=self.lock_timeout)
        self._resources.callback(ledger.close)
        return ledger

    @cached_property
    def ledger(self) -> Ledger:
        """The initialised ledger, refused if it belongs to another repository than the one here."""
        self.require_ledger_file()
        ledger = self.open_ledger()
        ledger.require_initialised()
        self.require_own_repository(ledger)
        return ledger

    def require_own_repository(self, ledger: Ledger) -> None:
        from ..adapters.identity import identity_mismatch

        common = self.repository
        if common is None or ledger.repository_id is None:
            return  # outside any repository (an auditor's copy), or a ledger bound to none
        mismatch = identity_mismatch(common, ledger.repository_id)
        if mismatch:
            raise Refused("foreign-ledger", f"{mismatch}: {self.paths.ledger} was not made for this repository "
                                            "(pass --ledger for this repository's own ledger)")

    @cached_property
    def repository(self) -> Path | None:
        """The git common dir of the repository around the working directory, if any."""
        from ..adapters.paths import find_git_common_dir

        return find_git_common_dir(Path.cwd())

    @cached_property
    def clock(self) -> Clock:
        from ..adapters.clock import clock_from_env
        from .output import warn

        clock, ignored = clock_from_env()
        if ignored:
            warn("clock-ignored", "DOCKET_NOW is honoured only with DOCKET_TESTING=1 (tests and demos); "
                                  "using the system clock")
        return clock

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
        """The views, caught up with the ledger; built in memory from the ledger itself when
        the views file cannot be opened or written (read-only mount, locked, disk full)."""
        from .output import warn

        reader = self.read_ledger()  # before creating views beside a file that is not a ledger
        try:
            return self._file_views(reader)
        except (OSError, sqlite3.Error) as e:
            warn("views-unavailable", f"cannot use {self.paths.views} ({e}); using views built in memory")
        except BadInput as e:
            warn("views-unavailable", f"cannot use {self.paths.views} ({e.code}: {e.message}); "
                                      "using views built in memory")
        from ..adapters.projector import catch_up, open_views

        views = open_views(":memory:")
        self._resources.callback(views.conn.close)
        catch_up(reader, views)
        return views

    def _file_views(self, reader: sqlite3.Connection) -> Views:
        from ..adapters.projector import catch_up, open_views

        views = open_views(self.paths.views, timeout=self.lock_timeout)
        self._resources.callback(views.conn.close)
        catch_up(reader, views)
        return views

    def update_views(self) -> None:
        """After a recorded event: bring the views file up to it, or warn that it will catch up later.

        The event is committed; a views failure (locked, disk full, damaged) must not
        turn a recorded command into a failed one that invites a retry.
        """
        from .output import warn

        try:
            self._file_views(self.read_ledger())
        except (OSError, sqlite3.Error, BadInput) as e:
            warn("views-behind", f"the event is recorded, but {self.paths.views} could not be updated ({e}); "
                                 "the views catch up on the next command")

    def close(self) -> None:
        self._resources.close()
