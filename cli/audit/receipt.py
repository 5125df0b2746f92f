"""docket seal / export / verify-receipt: a run's sealed receipt, its signed bundle, and the bundle's offline check."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import UsageError, command
from ...domain.kernel.codes import Code

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
                "chain digest and Merkle proof, and that the events say what the receipt says; with --repository, "
                "--commit or --run, that it is the receipt of that (exit 1 naming what failed)",
                "docket verify-receipt run-7k2m9x4q.intoto.jsonl --key keys/docket.pub --repository . "
                "--commit 3f2a9c1")
    p.add_argument("file", metavar="FILE", help="the bundle 'docket export' wrote")
    p.add_argument("--key", metavar="PUB", required=True, help="the Ed25519 public key (PEM) it must be signed with")
    p.add_argument("--repository", metavar="PATH|ID",
                   help="the repository it must be about: a docket repository id (repo-...), or a clone's path, "
                        "whose history of the receipt's base must have the receipt's root commits "
                        "(receipt-for-another-repository)")
    p.add_argument("--commit", metavar="SHA", help="the commit it must vouch for, 7 or more hex digits: a "
                                                   "completed run's final commit (receipt-for-another-commit)")
    p.add_argument("--run", metavar="ID", help="the run it must be of (receipt-for-another-run)")


def seal(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.receipts import seal_run
    from ..console.output import emit

    from ...projections.tasks import tasks_of

    planned = [row["task_id"] for row in tasks_of(ctx.views().conn, ctx.args.run)]
    sealed = seal_run(ctx.ledger, ctx.ledger_reader, ctx.clock, ctx.args.run, planned)
    if sealed.sealed_now:
        ctx.update_views()
    event = sealed.event
    target = event.receipt["target"]
    assert isinstance(target, dict)  # every receipt has its target section (domain/reports/receipts.py)
    outcome, final = target["outcome"], target["final_commit"]
    assert isinstance(outcome, dict)
    emit(ctx.json, {"run_id": event.run_id, "position": sealed.position, "sealed_now": sealed.sealed_now,
                    "receipt_sha256": event.receipt_sha256, "ledger_position": event.ledger_position,
                    "ledger_digest": event.ledger_digest, "merkle_root": event.merkle_root,
                    "cited": len(event.cited_positions), "receipt": event.receipt},
         f"run {event.run_id}: receipt {event.receipt_sha256[:16]} sealed at position {sealed.position}"
         f"{'' if sealed.sealed_now else ' (sealed before)'}; integration {outcome['status']}"
         f"{'' if outcome['code'] is None else ' (' + str(outcome['code']) + ')'}, "
         f"target {final}; ledger head {event.ledger_position}, root {event.merkle_root[:16]}")
    return 0


def export(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.export import receipt_bundle
    from ...adapters.service_layer.use_cases.receipts import find_receipt
    from ...adapters.world.ledger.signing import load_signer, write_bundle
    from ..console.output import emit, shown

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
    from ...adapters.service_layer.use_cases.export import verify_bundle
    from ...adapters.world.ledger.signing import load_verifier, read_bundle
    from ..console.output import emit, shown

    from ...domain.reports.receipt_claims import check_expected, subject_of

    verifier = load_verifier(ctx.args.key)
    summary = verify_bundle(read_bundle(ctx.args.file), verifier)
    verified = summary.receipt
    receipt = verified.receipt
    outcome = verified.outcome
    subject, digest = subject_of(receipt, summary.receipt_sha256)
    check_expected(receipt, _expected(ctx.args, receipt), subject_digest=digest)
    workers = _workers(receipt)
    emit(ctx.json, {"ok": True, "run_id": verified.run_id, "final_commit": verified.final_commit,
                    "subject": {"name": subject, "digest": digest}, "format": receipt.get("format", 1),
                    "repository": receipt.get("repository"),
                    "moved_by_others": receipt["target"].get("moved_by_others"), "workers": workers,
                    "outcome": outcome, "tree_size": verified.tree_size, "root": verified.root,
                    "events_checked": verified.events_checked, "check_statements": summary.check_statements,
                    "keyid": verifier.keyid},
         "\n".join([f"ok: run {shown(verified.run_id)}, integration {outcome['status']}"
                    f"{'' if outcome.get('code') is None else ' (' + shown(outcome['code']) + ')'}, "
                    + (f"final commit {verified.final_commit}" if "gitCommit" in digest else
                       f"vouching for no commit (the target stayed at {verified.final_commit})")
                    + f"; {verified.events_checked} cited events proven in the ledger tree of size "
                    f"{verified.tree_size}; {summary.check_statements} check statement(s) checked",
                    *_claims(receipt, workers)]))
    return 0


def _expected(args: argparse.Namespace, receipt: dict[str, Any]) -> Any:
    """What --repository, --commit and --run say to expect; a path is read for its identity and root commits."""
    from pathlib import Path

    from ...domain.reports.receipt_claims import REPOSITORY_ID, Expected

    given = args.repository
    if given is None or REPOSITORY_ID.fullmatch(given):
        return Expected(run=args.run, commit=args.commit, repository_id=given)
    from ...adapters.world.git.history import root_commits
    from ...adapters.world.ledger.identity import read_identity
    from ...adapters.world.files.paths import find_git_common_dir
    from ...domain.kernel.errors import NotFound

    common = find_git_common_dir(Path(given).absolute())
    if common is None:
        raise NotFound(Code.NOT_A_REPOSITORY, f"--repository {given}: neither a repository id (repo-...) nor a git "
                                           "repository")
    base = receipt["run"].get("base_commit")
    return Expected(run=args.run, commit=args.commit, repository_id=read_identity(common),
                    roots=root_commits(common, base) if base else None, path_given=True)


def _workers(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """Each delivered task's generations and what the receipt says each could touch (its sandbox; None: the
    receipt does not say)."""
    return [{"task_id": task["task_id"], "worker_id": g["worker_id"], "generation": g["generation"],
             "sandbox": g.get("sandbox")} for task in receipt["tasks"] for g in task["generations"]]


def _claims(receipt: dict[str, Any], workers: list[dict[str, Any]]) -> list[str]:
    import json

    from ..console.output import shown

    lines = []
    repository = receipt.get("repository")
    if repository is not None:
        roots = ", ".join(repository.get("roots") or []) or "unknown"
        lines.append(f"repository: {repository.get('id') or '(no docket id)'}, root commit(s) {roots}")
    moved = receipt["target"].get("moved_by_others")
    if moved is not None and moved["moved"]:
        listed = ", ".join(c[:12] for c in moved["commits"][:10]) + (" ..." if len(moved["commits"]) > 10 else "")
        lines.append(f"warning: the target moved during the run by commits docket did not make: {listed or '-'}"
                     + ("" if moved["base_reached"] else " (and the run's base is not on its line)"))
    elif moved is not None:
        lines.append("the target moved only by docket's own merges")
    for w in workers:
        lines.append(f"worker {shown(w['worker_id'])} generation {w['generation']} could touch: "
                     f"{_could_touch(w['sandbox'])}")
    return lines


def _could_touch(sandbox: dict[str, Any] | None) -> str:
    """One worker's sandbox as the receipt records it, in words."""
    import json

    from ..console.output import shown

    if sandbox is None:
        return "the receipt does not say"
    if not isinstance(sandbox, dict) or not sandbox.get("enforced", False):
        return "everything its user may (unsandboxed)" if isinstance(sandbox, dict) else shown(json.dumps(sandbox))
    network = sandbox.get("network")
    if isinstance(network, str):
        net = network
    elif network and all(isinstance(h, str) for h in network):
        net = "hosts " + ", ".join(shown(str(h)) for h in network) + " (through docket's egress proxy)"
    else:
        net = "TCP ports " + ", ".join(str(p) for p in network or [])
    return (f"write {', '.join(shown(str(r)) for r in sandbox.get('write_roots', [])) or 'nothing'}; read "
            f"{len(sandbox.get('read_roots', []))} root(s) more; network {net}; policy sha256 "
            f"{shown(str(sandbox.get('policy_sha256', '')))[:16]}")
