"""The Lease aggregate: one worker generation's exclusive right to a resource.

The fencing token is the ledger position of the LeaseGranted event, so tokens
only ever grow. A grant is refused while an unexpired lease is held by a holder
whose generation is still current; a lease whose holder was relaunched is
fenced and can be superseded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import events as ev
from .aggregate import next_event
from .kernel.errors import Refused, StaleToken
from .run import Run, require_open
from .kernel.streams import lease_stream as stream_of
from .kernel.values import add_ms, to_ms
from .worker import Worker, require_current
from .kernel.codes import Code

__all__ = ["Lease", "apply", "expire", "grant", "release", "renew", "stream_of"]


@dataclass(frozen=True)
class Lease:
    resource: str
    version: int
    token: int
    run_id: str
    worker_id: str
    generation: int
    expires_at: str
    status: str  # held | released | expired
    renewed_at: str | None = None  # when it was last granted or renewed: its holder's last sign of life

    def is_expired(self, now: str) -> bool:
        return to_ms(now) >= to_ms(self.expires_at)


def apply(lease: Lease | None, event: ev.Event, position: int) -> Lease:
    if isinstance(event, ev.LeaseGranted):
        return Lease(event.resource, event.version, position, event.run_id, event.worker_id,
                     event.generation, event.expires_at, "held", event.recorded_at)
    assert lease is not None
    lease = replace(lease, version=event.version)
    if isinstance(event, ev.LeaseRenewed):
        return replace(lease, expires_at=event.expires_at, renewed_at=event.recorded_at)
    if isinstance(event, ev.LeaseReleased):
        return replace(lease, status="released")
    if isinstance(event, ev.LeaseExpired):
        return replace(lease, status="expired")
    raise TypeError(f"Lease cannot apply {event.type_name()}")


def grant(lease: Lease | None, holder: Worker | None, worker: Worker, generation: int,
          run: Run, resource: str, ttl_ms: int, now: str, holder_liveness: str = "none") -> ev.Event:
    """Grant resource to worker's current generation for ttl_ms.

    ``holder`` is the worker holding the current lease, if there is one, and
    ``holder_liveness`` what is known of the process of the lease's generation:
    alive, dead, unknown, elsewhere (it runs on another host, which cannot be
    looked at from here), or none (it never had one). A held lease is reclaimed
    only when it has expired (or its generation is fenced) and its holder is not
    positively alive, or when its holder is positively dead. Unknown on this host
    never reclaims (a process here that cannot be read may still be working in
    what the lease guards); another host's holder is reclaimed once its host has
    stopped renewing and the lease expired, and is fenced by the new token.
    """
    require_current(worker, generation)
    require_open(run)
    supersedes = None
    if lease is not None and lease.status == "held":
        held_by = (f"{resource} is leased to worker {lease.worker_id} generation {lease.generation} "
                   f"(token {lease.token}) until {lease.expires_at}")
        fenced = holder is not None and holder.generation != lease.generation
        if holder_liveness == "alive":
            raise Refused(Code.LEASE_HELD, f"{held_by}, and its process is alive")
        if holder_liveness == "elsewhere" and not lease.is_expired(now) and not fenced:
            raise Refused(Code.LEASE_HELD, f"{held_by}, by a process of another host, which renews it")
        if holder_liveness == "unknown":
            raise Refused(Code.LEASE_HOLDER_UNKNOWN, f"{held_by}; whether its process is gone cannot be told, "
                                                  "so the lease is not reclaimed")
        if holder_liveness != "dead" and not lease.is_expired(now) and not fenced:
            raise Refused(Code.LEASE_HELD, held_by)
        supersedes = lease.token
    return next_event(ev.LeaseGranted, stream_of(resource), lease.version if lease else 0, now,
                      resource=resource, run_id=run.run_id, worker_id=worker.worker_id,
                      generation=generation, ttl_ms=ttl_ms, expires_at=add_ms(now, ttl_ms),
                      supersedes_token=supersedes)


def _require_held_with(lease: Lease | None, resource: str, token: int) -> Lease:
    if lease is None:
        raise Refused(Code.LEASE_NOT_HELD, f"{resource} has never been leased")
    if token != lease.token:
        raise StaleToken(f"token {token} is not the current token {lease.token} of {resource}")
    if lease.status != "held":
        raise Refused(Code.LEASE_NOT_HELD, f"the lease on {resource} (token {token}) is {lease.status}")
    return lease


def renew(lease: Lease | None, holder: Worker, resource: str, token: int, ttl_ms: int, now: str) -> ev.Event:
    lease = _require_held_with(lease, resource, token)
    require_current(holder, lease.generation)
    if lease.is_expired(now):
        raise Refused(Code.LEASE_EXPIRED, f"the lease on {resource} (token {token}) expired at {lease.expires_at}")
    return next_event(ev.LeaseRenewed, stream_of(resource), lease.version, now,
                      resource=resource, run_id=lease.run_id, token=token,
                      expires_at=add_ms(now, ttl_ms))


def release(lease: Lease | None, resource: str, token: int, now: str) -> ev.Event:
    lease = _require_held_with(lease, resource, token)
    return next_event(ev.LeaseReleased, stream_of(resource), lease.version, now, resource=resource,
                      run_id=lease.run_id, token=token)


def expire(lease: Lease | None, resource: str, now: str) -> ev.Event:
    if lease is None or lease.status != "held":
        raise Refused(Code.LEASE_NOT_HELD, f"{resource} has no lease to expire")
    if not lease.is_expired(now):
        raise Refused(Code.LEASE_NOT_EXPIRED, f"the lease on {resource} runs until {lease.expires_at}")
    return next_event(ev.LeaseExpired, stream_of(resource), lease.version, now,
                      resource=resource, run_id=lease.run_id, token=lease.token)
