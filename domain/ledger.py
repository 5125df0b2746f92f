"""The Ledger aggregate: the genesis event that fixes the chain."""

from __future__ import annotations

from . import events as ev
from .chain import CHAIN_ALGORITHM, GENESIS_DIGEST

__all__ = ["LEDGER_STREAM", "create"]

LEDGER_STREAM = "ledger"


def create(now: str) -> ev.LedgerCreated:
    return ev.LedgerCreated(stream=LEDGER_STREAM, version=1, recorded_at=now,
                            chain=CHAIN_ALGORITHM, genesis_digest=GENESIS_DIGEST)
