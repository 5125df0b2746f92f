"""The Ledger aggregate: the genesis event that fixes the chain and binds the ledger to its repository."""

from __future__ import annotations

from . import events as ev
from .kernel.chain import CHAIN_ALGORITHM, GENESIS_DIGEST
from .kernel.streams import LEDGER_STREAM

__all__ = ["LEDGER_STREAM", "GENESIS_TYPES", "create"]

GENESIS_TYPES = (ev.LedgerCreated.type_name(), ev.LedgerCreatedV2.type_name())


def create(now: str, repository_id: str | None = None, repository: str | None = None) -> ev.LedgerCreatedV2:
    return ev.LedgerCreatedV2(stream=LEDGER_STREAM, version=1, recorded_at=now, chain=CHAIN_ALGORITHM,
                              genesis_digest=GENESIS_DIGEST, repository_id=repository_id, repository=repository)
