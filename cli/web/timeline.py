"""A run's timeline drawn as SVG, server-side: one lane per task, a bar per span (domain.reports.timeline). This
module works out where each bar goes; templates/timeline.svg draws it, every text escaped. Colours are presentation
attributes, so the picture needs no style from the page."""

from __future__ import annotations

from typing import Any

from ...domain.reports.timeline import Timeline
from ...domain.kernel.values import format_duration

__all__ = ["drawing"]

WIDTH, LABEL, LANE, BAR = 960, 170, 24, 14
FILL = {"agent": "#4c78a8", "check": "#72b7b2", "merge": "#b279a2", "wait": "#f58518"}
FAILED = "#e45756"
SHOWN_LANES = 400  # a thousand-task run draws its first lanes and says how many more
FAILED_OUTCOMES = frozenset({"failed", "timed-out", "rejected", "conflicted", "expired", "lost", "launch-failed",
                             "timeout", "idle-timeout"})


def _x(ms: int, t: Timeline) -> float:
    return LABEL + (WIDTH - LABEL - 10) * (ms - t.start_ms) / (t.end_ms - t.start_ms)


def drawing(t: Timeline) -> dict[str, Any]:
    """The picture as the template draws it: its size, its axis, and each lane's bars (x, width, colour, what)."""
    lanes = t.lanes[:SHOWN_LANES]
    more = max(0, len(t.lanes) - SHOWN_LANES)
    height = 30 + LANE * len(lanes) + (LANE if more else 0)
    drawn = []
    for i, lane in enumerate(lanes):
        spans = []
        for span in lane.spans:
            x0, x1 = _x(span.start_ms, t), _x(span.end_ms, t)
            spans.append({"kind": span.kind, "x": x0, "width": max(1.0, x1 - x0), "open": span.open,
                          "fill": FAILED if span.outcome in FAILED_OUTCOMES else FILL[span.kind],
                          "title": f"{span.label}: {span.outcome}, "
                                   f"{format_duration(max(0, span.end_ms - span.start_ms) // 1000 * 1000) or '0s'}"})
        drawn.append({"task_id": lane.task_id, "y": 24 + LANE * i, "spans": spans})
    return {"width": WIDTH, "height": height, "label": LABEL, "bar": BAR,
            "duration": format_duration((t.end_ms - t.start_ms) // 1000 * 1000), "lanes": drawn, "more": more,
            "more_y": 24 + LANE * len(lanes) + 12}
