"""Bootstrap: the one place that builds adapters from options and environment.

Heavy modules (pydantic, eventsourcing, dulwich, sqlite-utils) are imported
only when a command needs them, so that read-only commands start fast.
"""

from __future__ import annotations

import argparse
import os
from contextlib import ExitStack
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ...adapters.world.files.paths import LedgerPaths, resolve_paths
from ...domain.kernel.errors import BadInput, NotFound, Refused
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...adapters.world.clock import Clock
    from ...adapters.service_layer.kernel.effector import Effector
    from ...adapters.service_layer.kernel.ledger import Ledger
    from ...adapters.service_layer.kernel.ports import LedgerReader
    from ...projections.views import Views


def seconds_setting(variable: str, least: int, default: int) -> int:
    """A whole number of seconds from least to 86400 in the environment variable; unset or empty: default."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 8 or not least <= int(text) <= 86_400:
        raise BadInput(Code.BAD_CONFIG, f"{variable}={text[:40]!r} is not a whole number of seconds from {least} to "
                                     f"86400 (unset: {default})")
    return int(text)


class Context:
    """What one command needs, built on first use and closed when it ends."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.json: bool = bool(getattr(args, "json", False))
        self._resources = ExitStack()
        self._ledger_file_checked = False

    @cached_property
    def paths(self) -> LedgerPaths:
        from .output import warn

        return resolve_paths(getattr(self.args, "ledger", None), warn=warn)

    def require_ledger_file(self) -> None:
        """The ledger file exists and is what it claims to be; warn once if others could read or replace it."""
        from ...adapters.world.files.files import check_ledger_file, exposure_warnings
        from .output import warn

        if self.paths.url is not None:
            return  # a database: the reader finds whether it holds a ledger
        if not os.path.lexists(self.paths.ledger):
            raise NotFound(Code.NO_LEDGER, f"no docket ledger at {self.paths.ledger}; run 'docket init' first")
        if not self._ledger_file_checked:
            if check_ledger_file(self.paths.ledger):
                for code, message in exposure_warnings(self.paths.ledger):
                    warn(code, message)
            self._ledger_file_checked = True

    @cached_property
    def approval_required(self) -> bool:
        """[integration] approval in the docket.toml around the working directory, read with the standard library
        once, and only when asked (a status with nothing to approve reads no configuration at all)."""
        from ...adapters.world.files.config_file import approval_required

        return approval_required(Path.cwd())

    @cached_property
    def lock_timeout(self) -> int:
        """Seconds to wait for the ledger's write lock: DOCKET_LOCK_TIMEOUT, else 60."""
        from ...adapters.world.ledger.ledger_rows import DEFAULT_LOCK_TIMEOUT  # not the ledger's module: status catching up

        return seconds_setting("DOCKET_LOCK_TIMEOUT", 1, DEFAULT_LOCK_TIMEOUT)

    def open_ledger(self) -> Ledger:
        """The ledger file opened for writing (created if missing), not yet checked."""
        from ...adapters.service_layer.kernel.ledger import Ledger

        chosen = getattr(self.args, "ledger", None) or os.environ.get("DOCKET_LEDGER")
        if chosen and not self.paths.ledger.parent.is_dir():  # docket makes only its own folder, in the repository
            raise BadInput(Code.BAD_LEDGER_PATH, f"the folder of {self.paths.ledger} does not exist; make it first")
        if self.paths.url is not None:
            ledger = self._open_database(Ledger)
        else:
            ledger = Ledger(self.paths.ledger, lock_timeout=self.lock_timeout)
        self._resources.callback(ledger.close)
        return ledger

    def _open_database(self, ledger_class: type[Ledger]) -> Ledger:
        """The PostgreSQL ledger, this machine's docket folder made for its views."""
        from ...adapters.world.files.files import own_folder

        docket_folder = self.paths.ledger.parent
        own_folder(docket_folder.parent, docket_folder)
        try:
            return ledger_class(self.paths.ledger, url=self.paths.url, lock_timeout=self.lock_timeout)
        except ValueError as e:
            raise BadInput(Code.BAD_DATABASE_URL, str(e)) from None

    @cached_property
    def ledger(self) -> Ledger:
        """The initialised ledger, refused if it belongs to another repository than the one here."""
        self.require_ledger_file()
        ledger = self.open_ledger()
        ledger.require_initialised()
        self.require_own_repository(ledger)
        return ledger

    def require_own_repository(self, ledger: Ledger) -> None:
        from ...adapters.world.ledger.identity import identity_mismatch

        common = self.repository
        if common is None or ledger.repository_id is None:
            return  # outside any repository (an auditor's copy), or a ledger bound to none
        mismatch = identity_mismatch(common, ledger.repository_id)
        if mismatch:
            raise Refused(Code.FOREIGN_LEDGER, f"{mismatch}: {self.paths.where} was not made for this repository "
                                            "(pass --ledger for this repository's own ledger)")

    @cached_property
    def repository(self) -> Path | None:
        """The git common dir of the repository around the working directory, if any."""
        from ...adapters.world.files.paths import find_git_common_dir

        return find_git_common_dir(Path.cwd())

    def require_repository(self) -> Path:
        """The git common dir around the working directory; NotFound outside a repository."""
        if self.repository is None:
            raise NotFound(Code.NOT_A_REPOSITORY, "no git repository here; run inside the repository the ledger is for")
        return self.repository

    def task_id(self, run_id: str, given: str) -> str:
        """A task of the run as typed: its ledger id, or its id in the tasks file of `docket go` (<run>.<id>)."""
        from ...domain import task as task_aggregate
        from ...domain.plan import ledger_task_id

        long = ledger_task_id(run_id, given)
        if self.ledger.get(task_aggregate.apply, task_aggregate.stream_of(given)) is None and self.ledger.get(
                task_aggregate.apply, task_aggregate.stream_of(long)) is not None:
            return long
        return given

    def worker_id(self, given: str) -> str:
        """A worker as typed: its id, or a task's id in a tasks file when one run alone has it (<run>.<id>)."""
        from ...projections import workers

        found = workers.named(self.views().conn, given)
        if len(found) > 1:
            raise BadInput(Code.AMBIGUOUS_ID, f"{given} names workers of several runs ({', '.join(found[:5])}); give "
                                           "the full id")
        return found[0] if found else given

    @cached_property
    def clock(self) -> Clock:
        from ...adapters.world.clock import clock_from_env
        from .output import warn

        clock, ignored = clock_from_env()
        if ignored:
            warn("clock-ignored", "DOCKET_NOW is honoured only with DOCKET_TESTING=1 (tests and demos); "
                                  "using the system clock")
        return clock

    @cached_property
    def effector(self) -> Effector:
        from ...adapters.service_layer.kernel.effector import Effector

        return Effector(self.ledger, self.clock, home=self.repository)  # this host's clone, for a shared ledger

    @cached_property
    def ledger_reader(self) -> LedgerReader:
        """The ledger read through the LedgerReader port, over a read-only connection kept for the command's life."""
        self.require_ledger_file()
        if self.paths.url is not None:
            from ...adapters.world.ledger.postgres_reader import postgres_reader

            server = self._resources.enter_context(postgres_reader(self.paths.url))
            if "stored_events" in server.missing_tables():
                raise NotFound(Code.NO_LEDGER, f"no docket ledger in {self.paths.where}; run 'docket init' first")
            return server
        from ...adapters.world.ledger.reader import ledger_reader

        reader = self._resources.enter_context(ledger_reader(self.paths.ledger))
        if "stored_events" in reader.missing_tables():
            raise NotFound(Code.NO_LEDGER, f"{self.paths.ledger} is not a docket ledger; run 'docket init' first")
        return reader

    def views(self, *, writable: bool = False) -> Views:
        """The views at the ledger's head (see adapters.service_layer.view_freshness.fresh_views), closed when the command ends."""
        from ...adapters.service_layer.kernel.view_freshness import current_views, fresh_views
        from .output import warn

        reader = self.ledger_reader  # before creating views beside a file that is not a ledger
        # current views first: the lock timeout's default comes with the ledger module, which status does not need
        views = None if writable else current_views(reader, self.paths.views)
        if views is None:
            views = fresh_views(reader, self.paths.views, timeout=self.lock_timeout, warn=warn, writable=writable)
        self._resources.callback(views.conn.close)
        return views

    def views_at(self, at: str) -> tuple[Views, str | None]:
        """Views rebuilt in memory up to a position or time, and the ledger's time there."""
        from ...adapters.service_layer.kernel.checkpoints import checkpoint_folder
        from ...adapters.service_layer.kernel.view_freshness import views_at

        views, then = views_at(self.ledger_reader, at, checkpoint_folder(self.paths.views))
        self._resources.callback(views.conn.close)
        return views, then

    def update_views(self) -> None:
        """After a recorded event: bring the views file up to it, or warn that it will catch up later."""
        from ...adapters.service_layer.kernel.view_freshness import update_views
        from .output import warn

        update_views(self.ledger_reader, self.paths.views, timeout=self.lock_timeout, warn=warn)

    def close(self) -> None:
        self._resources.close()
