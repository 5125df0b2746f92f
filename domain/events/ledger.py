"""Events of the ledger itself: the genesis event at position 1."""


from typing import Annotated

from pydantic import StringConstraints

from .base import Event, RepositoryPath

__all__ = ["LedgerCreated", "LedgerCreatedV2"]

Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
RepositoryId = Annotated[str, StringConstraints(pattern=r"^repo-[0-9a-f]{32}$")]


class LedgerCreated(Event):
    """Legacy genesis event (v1): fixes the chain algorithm and digest(0), bound to no repository."""

    name = "LedgerCreated"
    chain: str
    genesis_digest: Digest


class LedgerCreatedV2(Event):
    """The genesis event at position 1: fixes the chain algorithm and digest(0), and binds
    the ledger to its repository (the identity docket keeps in that repository's git
    common dir, and where that was). Both are null for a ledger made outside a repository.
    """

    name = "LedgerCreated"
    schema_version = 2
    chain: str
    genesis_digest: Digest
    repository_id: RepositoryId | None
    repository: RepositoryPath | None
