"""A ledger call ridden over an outage of its PostgreSQL database: called again once the outage is waited out."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from eventsourcing.persistence import OperationalError

__all__ = ["MAX_OUTAGES"]

MAX_OUTAGES = 10  # outages one call rides out, one after another, before it gives up (each waited out in full)

P = ParamSpec("P")
R = TypeVar("R")


def _riding_out(method: Callable[P, R]) -> Callable[P, R]:
    """Call it again after an outage of a PostgreSQL ledger's database is waited out (database_outage.py), when
    nothing it did can have been kept: a read, or a write whose commit was not begun. A write that failed in its
    commit is not known to be recorded or not: StorageFailed, for ``docket go --resume`` and replay to settle. Inside
    a decision (its reads) the decision itself is what is called again."""
    @wraps(method)
    def riding_out(*args: P.args, **kwargs: P.kwargs) -> R:
        self: Any = args[0]  # the Ledger whose method it is
        if self.url is None or self._cursor is not None:
            return method(*args, **kwargs)
        import psycopg
        from eventsourcing.persistence import InterfaceError

        from ....domain.kernel.errors import StorageFailed
        from ...world.ledger.database_outage import waiting_out

        outage = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
        for _ in range(MAX_OUTAGES):
            self.recorder.commit_begun = False
            try:
                return method(*args, **kwargs)
            except outage as e:
                if self.recorder.commit_begun:
                    raise StorageFailed(f"the ledger's database {self.where} went away while a write was being "
                                        f"committed, so whether it was recorded is not known ({e}); "
                                        "'docket go --resume' or 'docket replay --apply' settles it") from e
                waiting_out(self.recorder.ping, lambda error: isinstance(error, outage), self.where)
        return method(*args, **kwargs)

    return riding_out
