"""A run's timeline drawn as SVG, server-side: one lane per task, a bar per span (domain.timeline). Every text is
escaped; colours are presentation attributes, so the picture needs no style from the page."""

from __future__ import annotations

from html import escape

from ...domain.timeline import Timeline
from ...domain.values import format_duration

__all__ = ["svg"]

WIDTH, LABEL, LANE, BAR = 960, 170, 24, 14
FILL = {"agent": "#4c78a8", "check": "#72b7b2", "merge": "#b279a2", "wait": "#f58518"}
FAILED = "#e45756"
SHOWN_LANES = 400  # a thousand-task run draws its first lanes and says how many more


def _x(ms: int, t: Timeline) -> float:
    return LABEL + (WIDTH - LABEL - 10) * (ms - t.start_ms) / (t.end_ms - t.start_ms)


def svg(t: Timeline) -> str:
    lanes = t.lanes[:SHOWN_LANES]
    height = 30 + LANE * len(lanes) + (LANE if len(t.lanes) > SHOWN_LANES else 0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline">',
           f'<text x="{LABEL}" y="14" font-size="11" fill="#555">0</text>',
           f'<text x="{WIDTH - 10}" y="14" font-size="11" fill="#555" text-anchor="end">'
           f'{escape(format_duration((t.end_ms - t.start_ms) // 1000 * 1000))}</text>']
    for i, lane in enumerate(lanes):
        y = 24 + LANE * i
        out.append(f'<text x="4" y="{y + BAR - 3}" font-size="12" fill="#222">{escape(lane.task_id[-28:])}'
                   f'<title>{escape(lane.task_id)}</title></text>')
        for span in lane.spans:
            x0, x1 = _x(span.start_ms, t), _x(span.end_ms, t)
            failed = span.outcome in ("failed", "timed-out", "rejected", "conflicted", "expired", "lost",
                                      "launch-failed", "timeout", "idle-timeout")
            fill = FAILED if failed else FILL[span.kind]
            what = (f"{span.label}: {span.outcome}, "
                    f"{format_duration(max(0, span.end_ms - span.start_ms) // 1000 * 1000) or '0s'}")
            faded = ' opacity="0.6"' if span.open else ""
            out.append(f'<rect class="span {span.kind}" x="{x0:.1f}" y="{y}" width="{max(1.0, x1 - x0):.1f}" '
                       f'height="{BAR}" fill="{fill}"{faded}><title>{escape(what)}</title></rect>')
    if len(t.lanes) > SHOWN_LANES:
        out.append(f'<text x="4" y="{24 + LANE * len(lanes) + 12}" font-size="12" fill="#555">'
                   f'and {len(t.lanes) - SHOWN_LANES} more task(s)</text>')
    out.append("</svg>")
    return "".join(out)
