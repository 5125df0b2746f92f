"""docket seal / export / verify-receipt: a run's sealed receipt, its signed bundle, and the bundle's offline check."""

from __future__ import annotations

import argparse
from typing import Any

from .context import Context
from .parsing import UsageError, command

__all__ = ["add_export", "add_seal", "add_verify_receipt"]


def add_seal(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "seal", seal, common,
                "record the run's receipt (ReceiptSealed) once its integration has ended; sealing again prints the "
                "same receipt (exit 3 not-integrated before)",
                "docket seal run-7k2m9x4q --json")
    p.add_argument("run", metavar="RUN", help="run id")


def add_export(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "export", export, common,
                "write the sealed run's signed bundle: JSON Lines of DSSE envelopes, the receipt with every cited "
                "event and its Merkle proof first, then one in-toto test result per check (exit 3 not-sealed, "
                "output-exists)",
                "docket export run-7k2m9x4q --key keys/docket.key --out run-7k2m9x4q.intoto.jsonl")
    p.add_argument("run", metavar="RUN", nargs="?", help="run id")
    p.add_argument("--key", metavar="KEY", help="the Ed25519 private key (PEM) to sign with ('docket key generate')")
    p.add_argument("--out", metavar="FILE", help="the bundle to create; an existing file is never overwritten")
    p.add_argument("--all", action="store_true",
                   help="instead: every sealed receipt to stdout, one JSON object a line (run, receipt_sha256, "
                        "ledger position and digest, merkle_root, receipt), for audit pipelines")
    p.add_argument("--format", choices=["jsonl"], default="jsonl", help="the format of --all: jsonl (JSON Lines)")


def add_verify_receipt(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "verify-receipt", verify_receipt, common,
                "check an exported bundle with no ledger: every signature, the receipt's digest, every cited event's "
                "chain digest and Merkle proof, and that the events say what the receipt says (exit 1 naming what "
                "failed)",
                "docket verify-receipt run-7k2m9x4q.intoto.jsonl --key keys/docket.pub")
    p.add_argument("file", metavar="FILE", help="the bundle 'docket export' wrote")
    p.add_argument("--key", metavar="PUB", required=True, help="the Ed25519 public key (PEM) it must be signed with")


def seal(ctx: Context) -> int:
    from ..adapters.service_layer.receipts import seal_run
    from .output import emit

    from ..projections.tasks import tasks_of

    planned = [row["task_id"] for row in tasks_of(ctx.views().conn, ctx.args.run)]
    sealed = seal_run(ctx.ledger, ctx.ledger_reader, ctx.clock, ctx.args.run, planned)
    if sealed.sealed_now:
        ctx.update_views()
    event = sealed.event
    outcome = event.receipt["target"]["outcome"]  # type: ignore[index]
    final = event.receipt["target"]["final_commit"]  # type: ignore[index]
    emit(ctx.json, {"run_id": event.run_id, "position": sealed.position, "sealed_now": sealed.sealed_now,
                    "receipt_sha256": event.receipt_sha256, "ledger_position": event.ledger_position,
                    "ledger_digest": event.ledger_digest, "merkle_root": event.merkle_root,
                    "cited": len(event.cited_positions), "receipt": event.receipt},
         f"run {event.run_id}: receipt {event.receipt_sha256[:16]} sealed at position {sealed.position}"
         f"{'' if sealed.sealed_now else ' (sealed before)'}; integration {outcome['status']}"  # type: ignore[index]
         f"{'' if outcome['code'] is None else ' (' + str(outcome['code']) + ')'}, "  # type: ignore[index]
         f"target {final}; ledger head {event.ledger_position}, root {event.merkle_root[:16]}")
    return 0


def export(ctx: Context) -> int:
    from ..adapters.service_layer.export import receipt_bundle
    from ..adapters.service_layer.receipts import find_receipt
    from ..adapters.world.signing import load_signer, write_bundle
    from .output import emit, shown

    if ctx.args.all:
        if ctx.args.run is not None or ctx.args.key or ctx.args.out:
            raise UsageError("export --all takes no RUN, --key or --out: it prints every sealed receipt")
        from .proofs import export_all

        return export_all(ctx)
    if ctx.args.run is None:
        raise UsageError("export needs RUN (or --all)")
    if not ctx.args.key or not ctx.args.out:
        raise UsageError("export needs --key KEY and --out FILE")
    signer = load_signer(ctx.args.key)  # a bad key fails before anything is read
    sealed = find_receipt(ctx.ledger, ctx.args.run)
    envelopes = receipt_bundle(ctx.ledger_reader, sealed, signer)
    path = write_bundle(ctx.args.out, envelopes)
    emit(ctx.json, {"run_id": sealed.event.run_id, "out": str(path), "lines": len(envelopes),
                    "receipt_sha256": sealed.event.receipt_sha256, "events": len(sealed.event.cited_positions),
                    "keyid": signer.public_key.keyid},
         f"wrote {shown(path)}: the receipt of run {shown(sealed.event.run_id)} with "
         f"{len(sealed.event.cited_positions)} cited events, and {len(envelopes) - 1} check result(s)")
    return 0


def verify_receipt(ctx: Context) -> int:
    """Reads no ledger at all: the bundle and the key are everything it needs."""
    from ..adapters.service_layer.export import verify_bundle
    from ..adapters.world.signing import load_verifier, read_bundle
    from .output import emit, shown

    verifier = load_verifier(ctx.args.key)
    summary = verify_bundle(read_bundle(ctx.args.file), verifier)
    verified = summary.receipt
    outcome = verified.outcome
    emit(ctx.json, {"ok": True, "run_id": verified.run_id, "final_commit": verified.final_commit,
                    "outcome": outcome, "tree_size": verified.tree_size, "root": verified.root,
                    "events_checked": verified.events_checked, "check_statements": summary.check_statements,
                    "keyid": verifier.keyid},
         f"ok: run {shown(verified.run_id)}, integration {outcome['status']}"
         f"{'' if outcome.get('code') is None else ' (' + shown(outcome['code']) + ')'}, final commit "
         f"{verified.final_commit}; {verified.events_checked} cited events proven in the ledger tree of size "
         f"{verified.tree_size}; {summary.check_statements} check statement(s) checked")
    return 0
