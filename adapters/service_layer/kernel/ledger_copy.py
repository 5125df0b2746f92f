"""Copy a ledger to another store (an SQLite file into PostgreSQL, and back), the chain verified on both sides.

Every event is copied as it is stored: its position, stream, version, type and exact bytes. The target's store
chains them itself, in batches, each in one write transaction, and each batch must end on the source's digest at
its last position: the copy is refused at the first batch where the two chains part. The source is verified before
a row is copied and the target after the last. A copy that was stopped resumes: a target holding a prefix of the
source (the same digest at its head) goes on from there; a target holding anything else is refused.

What the ledger derives (snapshots, kept Merkle nodes, the effector's cursor) is not copied: the target's store
makes its own as it is used, and `docket replay` checks them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from ....domain.kernel.chain import ChainHead
from ....domain.kernel.errors import Conflict, VerificationFailed
from .ports import LedgerReader
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from .ledger import Ledger

__all__ = ["Copied", "copy_ledger"]

BATCH = 1000


@dataclass(frozen=True)
class Copied:
    head: ChainHead  # the source's head, verified, and now the target's
    copied: int  # events copied by this call
    resumed_from: int  # the target's head before it (0: it was empty)


def copy_ledger(source: LedgerReader, target: Ledger, target_reader: Callable[[], AbstractContextManager[LedgerReader]], *,
                progress: Callable[[int], None] | None = None) -> Copied:
    """Copy every event of source (a reader) into target (a Ledger on the other store), verified on both sides.

    target_reader() opens a reader of the target once the copy is done, for its own verification.
    """
    head, broken = source.verify_chain()
    if broken is not None:
        raise VerificationFailed(Code.CHAIN_BROKEN, f"the source ledger's chain breaks at position {broken.position} "
                                                 f"({broken.reason}); nothing was copied")
    start = target.head()
    if start:
        if start > head.position or target.digest_at(start) != source.digest_at(start):
            raise Conflict(Code.TARGET_NOT_EMPTY, f"the target already holds {start} events that are not the start of "
                                               "this ledger; copy into an empty database or file")
    rows = source.chain_rows(after=start, until=head.position)
    try:
        copied = 0
        while batch := list(islice(rows, BATCH)):
            target.copy_stored(batch)
            copied += len(batch)
            if progress is not None:
                progress(start + copied)
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    with target_reader() as reader:
        target_head, broken = reader.verify_chain()
    if broken is not None or target_head != head:
        raise VerificationFailed(Code.CHAIN_BROKEN, f"the copy does not verify: its chain ends at {target_head.position} "
                                                 f"{target_head.digest}, the source's at {head.position} {head.digest}")
    return Copied(head, copied, start)
