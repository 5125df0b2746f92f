"""docket prove-consistency: the RFC 9162 consistency proof between two sealed ledger heads; and export --all,
every sealed receipt as JSON Lines for audit pipelines."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.output import emit
from ..console.parsing import command

__all__ = ["add_prove_consistency", "export_all"]


def add_prove_consistency(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "prove-consistency", prove_consistency, common,
                "prove that the ledger sealed at NEW extends the one sealed at OLD (RFC 9162 consistency proof), "
                "checked against this ledger (exit 1 inconsistent when it does not)",
                "docket prove-consistency r1 receipt-r2.jsonl --json")
    p.add_argument("old", metavar="OLD", help="the older seal: a sealed run id, or a bundle file from 'docket export'")
    p.add_argument("new", metavar="NEW", help="the newer seal: a sealed run id, or a bundle file from 'docket export'")


def prove_consistency(ctx: Context) -> int:
    from ...adapters.service_layer.kernel.proofs import prove_consistency as prove
    from ...adapters.service_layer.kernel.proofs import sealed_head

    reader = ctx.ledger_reader
    doc = prove(reader, sealed_head(reader, ctx.args.old), sealed_head(reader, ctx.args.new))
    lines = [f"consistent: size {doc['old_size']} root {doc['old_root']}",
             f"  extends into size {doc['new_size']} root {doc['new_root']}",
             f"  proof ({len(doc['proof'])} hashes):", *(f"    {node}" for node in doc["proof"])]
    emit(ctx.json, {"ok": True, **doc}, "\n".join(lines))
    return 0


def export_all(ctx: Context) -> int:
    """`docket export --all --format jsonl`: every sealed receipt, one JSON object a line, in ledger order."""
    import json
    import sys

    from ...adapters.service_layer.kernel.proofs import sealed_receipts

    for sealed in sealed_receipts(ctx.ledger_reader):
        sys.stdout.write(json.dumps(sealed, sort_keys=True, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0
