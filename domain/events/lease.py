"""Events of the Lease aggregate (stream ``lease:<resource>``)."""


from .base import Event, Generation, Id, Position, PositiveMs, Resource, Timestamp

__all__ = ["LeaseExpired", "LeaseGranted", "LeaseReleased", "LeaseRenewed"]


class LeaseGranted(Event):
    """A worker generation gets a resource until expires_at.

    Its fencing token is this event's ledger position.
    """

    name = "LeaseGranted"
    resource: Resource
    run_id: Id
    worker_id: Id
    generation: Generation
    ttl_ms: PositiveMs
    expires_at: Timestamp
    supersedes_token: Position | None


class LeaseRenewed(Event):
    """The holder extends its lease."""

    name = "LeaseRenewed"
    resource: Resource
    run_id: Id
    token: Position
    expires_at: Timestamp


class LeaseReleased(Event):
    """The holder gives the resource back."""

    name = "LeaseReleased"
    resource: Resource
    run_id: Id
    token: Position


class LeaseExpired(Event):
    """The lease ran past its expiry and is recorded as ended."""

    name = "LeaseExpired"
    resource: Resource
    run_id: Id
    token: Position
