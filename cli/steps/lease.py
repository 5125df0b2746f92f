"""docket lease grant / renew / release / expire."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group, position
from ..console.recorded import recorded

__all__ = ["register"]

RESOURCE_HELP = (
    "what is leased: a path inside the repository (worktrees/a) or another name (task:t1). A relative path is "
    "relative to the repository root, not the working directory, and every spelling of one place (./wt/a, wt//a, "
    "wt/a/, <root>/wt/a) is the one name wt/a. Refused: a path outside the repository, the root itself, control "
    "and bidi characters"
)


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    lease = group(nouns, "lease", "grant, renew, release and expire leases",
                  "docket lease grant worktrees/w1 --worker w1 --generation 1 --ttl 10m")
    p = command(lease, "grant", lease_grant, common, "grant a resource to a worker generation",
                "docket lease grant worktrees/a --worker worker-1 --generation 1 --ttl 10m")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)
    p.add_argument("--worker", required=True, metavar="WORKER", help="the worker that will hold it")
    p.add_argument("--generation", required=True, type=position, metavar="N",
                   help="the worker's current generation (a fenced one is refused)")
    p.add_argument("--ttl", required=True, metavar="DURATION", help="how long the lease lasts from now, e.g. 10m")
    p = command(lease, "renew", lease_renew, common, "extend a lease",
                "docket lease renew worktrees/a --token 12 --ttl 10m")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)
    p.add_argument("--token", required=True, type=position, metavar="N", help="the lease's fencing token")
    p.add_argument("--ttl", required=True, metavar="DURATION", help="how long the lease lasts from now, e.g. 10m")
    p = command(lease, "release", lease_release, common, "give a lease back",
                "docket lease release worktrees/a --token 12")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)
    p.add_argument("--token", required=True, type=position, metavar="N", help="the lease's fencing token")
    p = command(lease, "expire", lease_expire, common, "record that a lease ran past its expiry",
                "docket lease expire worktrees/a")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)


def _resource(text: str) -> str:
    """The resource's one name: a relative one is relative to the repository root, not the working directory."""
    from ...adapters.world.files.paths import repository_root
    from ...domain.kernel.names import normalise_resource

    root = repository_root(Path.cwd())
    return normalise_resource(text, None if root is None else str(root))


def lease_grant(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.leases import grant_lease
    from ...domain.events import LeaseGranted
    from ...domain.kernel.values import format_duration, parse_duration

    a = ctx.args
    a.resource = _resource(a.resource)
    ttl_ms = parse_duration(a.ttl)
    appended = grant_lease(ctx.ledger, ctx.clock, a.resource, a.worker, a.generation, ttl_ms)
    token, event = appended.last
    assert isinstance(event, LeaseGranted)  # what a grant records
    return recorded(ctx, appended, f"lease on {a.resource} granted to {a.worker} generation {a.generation}: "
                    f"token {token}, expires {event.expires_at} ({format_duration(ttl_ms)})", token=token)


def lease_renew(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.leases import renew_lease
    from ...domain.events import LeaseRenewed
    from ...domain.kernel.values import parse_duration

    a = ctx.args
    a.resource = _resource(a.resource)
    appended = renew_lease(ctx.ledger, ctx.clock, a.resource, a.token, parse_duration(a.ttl))
    renewed = appended.last[1]
    assert isinstance(renewed, LeaseRenewed)  # what a renewal records
    return recorded(ctx, appended, f"lease on {a.resource} (token {a.token}) renewed until {renewed.expires_at}")


def lease_release(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.leases import release_lease

    ctx.args.resource = _resource(ctx.args.resource)
    appended = release_lease(ctx.ledger, ctx.clock, ctx.args.resource, ctx.args.token)
    return recorded(ctx, appended, f"lease on {ctx.args.resource} (token {ctx.args.token}) released")


def lease_expire(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.leases import expire_lease

    ctx.args.resource = _resource(ctx.args.resource)
    appended = expire_lease(ctx.ledger, ctx.clock, ctx.args.resource)
    return recorded(ctx, appended, f"lease on {ctx.args.resource} recorded as expired")
