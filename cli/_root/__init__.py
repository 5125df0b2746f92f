"""docket: a tamper-evident ledger and supervisor for coding-agent runs."""

from docket import pydantic_plugins
from docket.cli import __version__

pydantic_plugins.install()  # before any of docket's models builds a validator

__all__ = ["__version__"]
