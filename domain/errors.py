"""Typed errors with stable codes; the CLI maps each family to one exit code.

Exit codes (DESIGN.md): 0 ok, 1 verification failed, 2 usage or bad input,
3 conflict or refused by an invariant, 4 effect outcome unknown, 5 not found,
6 the work failed (an agent or a setup command), 7 docket stopped the work.
"""

from __future__ import annotations

__all__ = [
    "BadInput",
    "Conflict",
    "DocketError",
    "NotFound",
    "OutcomeUnknown",
    "Refused",
    "VerificationFailed",
    "WorkFailed",
    "WorkStopped",
]


class DocketError(Exception):
    exit_code = 2

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


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
