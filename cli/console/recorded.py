"""What a write command prints: the events it recorded, once the views have caught up with them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .output import emit, shown

if TYPE_CHECKING:
    from ...adapters.service_layer.kernel.appended import Appended
    from .context import Context

__all__ = ["event_doc", "recorded"]


def recorded(ctx: Context, appended: Appended, human: str, **extra: Any) -> int:
    """Bring the views up to what was just recorded (or warn that they are behind), then print it."""
    ctx.update_views()
    emit(ctx.json, {**extra, "events": [event_doc(p, e) for p, e in appended.events]}, shown(human))
    return 0


def event_doc(position: int, event: Any) -> dict[str, Any]:
    return {"position": position, "type": event.type_name(), "stream": event.stream,
            "recorded_at": event.recorded_at, "payload": event.payload()}
