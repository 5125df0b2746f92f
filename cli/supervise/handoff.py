"""docket handoff offer / confirm: a worker's checked candidate handed to the run's integrator."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group

__all__ = ["register", "required_checks"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    handoff = group(nouns, "handoff", "hand a checked candidate to the run's integrator",
                    "docket handoff offer 3f9a1c0e && docket handoff confirm 3f9a1c0e")
    p = command(handoff, "offer", handoff_offer, common,
                "offer the candidate for integration, on behalf of the worker generation that made it "
                "(refused for a fenced generation)",
                "docket handoff offer 3f9a1c0e")
    p.add_argument("candidate", metavar="CANDIDATE", help="binding id (or at least 8 of its digits), or the commit")
    p = command(handoff, "confirm", handoff_confirm, common,
                "confirm the handoff if the worker's process is gone, its lease released or fenced, the pin "
                "unchanged and every required check passed under its current configuration; else record why not "
                "(exit 3, the failing condition's code)",
                "docket handoff confirm 3f9a1c0e --json")
    p.add_argument("candidate", metavar="CANDIDATE", help="binding id (or at least 8 of its digits), or the commit")


def required_checks() -> dict[str, str]:
    """Each required check of docket.toml and the digest of its configuration now."""
    from pathlib import Path

    from ...adapters.world.files.config_file import load_trusted_config
    from ...domain.config import check_config_sha256

    config = load_trusted_config(Path.cwd())
    return {name: check_config_sha256(name, config.checks[name]) for name in config.required_checks()}


def handoff_offer(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.candidates import find_candidate
    from ...adapters.service_layer.use_cases.handoff import offer_handoff
    from ..console.output import emit

    found = find_candidate(ctx.ledger, ctx.views(), ctx.args.candidate)
    candidate = offer_handoff(ctx.ledger, ctx.clock, found.binding_id)
    ctx.update_views()
    emit(ctx.json, {"binding_id": candidate.binding_id, "handoff": candidate.handoff, "worker_id": candidate.worker_id,
                    "generation": candidate.generation},
         f"candidate {candidate.binding_id[:12]}: handoff {candidate.handoff} by worker {candidate.worker_id} "
         f"generation {candidate.generation}")
    return 0


def handoff_confirm(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.candidates import find_candidate
    from ...adapters.service_layer.use_cases.handoff import confirm_handoff, last_rejection
    from ...domain.kernel.errors import Refused
    from ..console.output import emit

    found = find_candidate(ctx.ledger, ctx.views(), ctx.args.candidate)
    candidate = confirm_handoff(ctx.ledger, ctx.clock, ctx.effector, found.binding_id, required_checks())
    ctx.update_views()
    if candidate.handoff != "confirmed":
        raise Refused(candidate.handoff_code or "handoff-rejected", last_rejection(ctx.ledger, candidate.binding_id))
    emit(ctx.json, {"binding_id": candidate.binding_id, "handoff": "confirmed", "commit": candidate.commit},
         f"candidate {candidate.binding_id[:12]}: handoff confirmed (commit {candidate.commit})")
    return 0
