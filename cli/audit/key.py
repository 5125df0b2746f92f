"""docket key generate: an Ed25519 key pair for signing exported receipts."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    key = group(nouns, "key", "make the Ed25519 key pair that signs exported receipts",
                "docket key generate --out keys/docket")
    p = command(key, "generate", key_generate, common,
                "write a new Ed25519 key pair: PREFIX.key (private, PEM PKCS8, mode 0600) and PREFIX.pub (public, "
                "PEM, 0644); an existing file is never overwritten (exit 3 key-exists)",
                "docket key generate --out keys/docket --json")
    p.add_argument("--out", metavar="PREFIX", required=True, help="where to write: PREFIX.key and PREFIX.pub")


def key_generate(ctx: Context) -> int:
    from ...adapters.world.ledger.signing import generate_key, load_verifier
    from ..console.output import emit, shown

    private, public = generate_key(ctx.args.out)
    keyid = load_verifier(public).keyid
    emit(ctx.json, {"private_key": str(private), "public_key": str(public), "keyid": keyid},
         f"wrote private key {shown(private)} (mode 0600; keep it secret) and public key {shown(public)}\n"
         f"keyid {keyid}")
    return 0
