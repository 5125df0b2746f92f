"""Typed errors with stable codes; the CLI maps each family to one exit code.

Exit codes (DESIGN.md): 0 ok, 1 verification failed, 2 usage or bad input,
3 conflict or refused by an invariant, 4 effect outcome unknown, 5 not found,
6 the work failed (an agent or a setup command), 7 docket stopped the work,
9 docket's own output could not be written (output-failed).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from .codes import Code


__all__ = [
    "AwaitingApproval",
    "BadInput",
    "Conflict",
    "DependenciesUnsettled",
    "DocketError",
    "Fenced",
    "LedgerTampered",
    "NotFound",
    "OutcomeUnknown",
    "OutputExists",
    "OutputFailed",
    "Refused",
    "RunClosed",
    "StaleGeneration",
    "StaleToken",
    "StorageFailed",
    "TargetCheckedOut",
    "VerificationFailed",
    "WorkFailed",
    "WorkStopped",
    "translating",
]

P = ParamSpec("P")
T = TypeVar("T")


class DocketError(Exception):
    exit_code = 2

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = str(code)  # a Code member's text: events and JSON hold plain strings
        self.message = message

    def explained(self, message: str) -> DocketError:
        """The same error (its type, code and exit code) told with another message, e.g. with its context."""
        told = type(self).__new__(type(self))  # not __init__: the one-argument types fix their code there
        told.__dict__.update(self.__dict__)
        told.message = message
        told.args = (f"{self.code}: {message}",)
        return told


class StorageFailed(DocketError):
    """The database under the ledger or the views failed (damaged, locked, full, unreadable), in its own words.

    The stores translate their driver's errors into it (adapters/world, projections): nothing above them names the
    database they use.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(Code.DATABASE, message)


def translating(driver_error: type[Exception]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A decorator for a store's methods: the driver's error (e.g. sqlite3.Error) leaves them as StorageFailed."""

    def decorate(method: Callable[P, T]) -> Callable[P, T]:
        @wraps(method)
        def calling(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return method(*args, **kwargs)
            except driver_error as e:
                raise StorageFailed(str(e)) from e

        return calling

    return decorate


class VerificationFailed(DocketError):
    exit_code = 1


class BadInput(DocketError):
    exit_code = 2


class Refused(DocketError):
    """An invariant of an aggregate refuses the command."""

    exit_code = 3


class Conflict(Refused):
    """Another writer changed the same thing first."""


class OutcomeUnknown(DocketError):
    exit_code = 4


class NotFound(DocketError):
    exit_code = 5


class WorkFailed(DocketError):
    """The work docket ran failed: an agent exited non-zero or by a signal, a setup command failed."""

    exit_code = 6


class WorkStopped(DocketError):
    """docket stopped the work: a timeout, an idle timeout, the budget, or a stop request."""

    exit_code = 7


class OutputFailed(DocketError):
    """docket's output could not be written (stdout closed, full, or its terminal gone): the user's pipe, not the
    work, whose events are in the ledger all the same. reader_gone: a pipe whose reader closed it (`docket log |
    head`), which ends the output quietly."""

    exit_code = 9

    def __init__(self, message: str, *, reader_gone: bool = False):
        super().__init__(Code.OUTPUT_FAILED, message)
        self.reader_gone = reader_gone


# Refusals a caller decides by: each has its one code, so the caller names the type (``except RunClosed:``).


class RunClosed(Refused):
    """The run is closed (completed, failed or cancelled): nothing more happens in it."""

    def __init__(self, message: str):
        super().__init__(Code.RUN_CLOSED, message)


class LedgerTampered(VerificationFailed):
    """The ledger file docket go works on vanished, was replaced or was rewritten under it: nothing is delivered.
    code: ledger-vanished, ledger-replaced or ledger-rewritten; exit 1, as every ledger that fails verification."""


class TargetCheckedOut(Refused):
    """The integration target is checked out with changes in the way: only its user can lift that."""

    def __init__(self, message: str):
        super().__init__(Code.TARGET_CHECKED_OUT, message)


class AwaitingApproval(Refused):
    """The integration needs a person's approval of tasks first."""

    def __init__(self, message: str):
        super().__init__(Code.AWAITING_APPROVAL, message)


class DependenciesUnsettled(Refused):
    """A task's dependencies are not integrated yet: its step waits in the queue."""

    def __init__(self, message: str):
        super().__init__(Code.DEPENDENCIES_UNSETTLED, message)


class OutputExists(Refused):
    """The file docket would write is there already; it is never overwritten."""

    def __init__(self, message: str):
        super().__init__(Code.OUTPUT_EXISTS, message)


class Fenced(Refused):
    """An action of a generation or a lease token that is no longer current: recorded, not only reported."""


class StaleGeneration(Fenced):
    def __init__(self, message: str):
        super().__init__(Code.STALE_GENERATION, message)


class StaleToken(Fenced):
    def __init__(self, message: str):
        super().__init__(Code.STALE_TOKEN, message)
