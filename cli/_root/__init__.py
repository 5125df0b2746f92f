"""docket: a tamper-evident ledger and supervisor for coding-agent runs."""

from docket.cli import __version__

__all__ = ["__version__"]
