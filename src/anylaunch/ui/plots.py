"""Inline SVG plots: state timelines and the training curve.

Drawn on the server as plain markup, so the page needs no charting library and no build
step, and the plots are in the HTML a test can read. Colours come from the stylesheet
(`st-STATE` classes), so a state looks the same in a timeline, a badge and a run grid.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from anylaunch.ui.metrics import Progress

WIDTH = 1000
LABEL = 130  # room for the row names at the left of a timeline
ROW = 22


@dataclass
class Lane:
    """One row of a timeline: a job's state history (an attempt of a split, in a run)."""

    label: str
    events: Sequence[dict[str, Any]]  # {at, state, detail}, oldest first
    live: bool
    href: str | None = None
    marks: list[float] = field(default_factory=list)  # resubmissions (a new attempt)


def lane(label: str, events: Sequence[dict[str, Any]], live: bool, href: str | None = None) -> Lane:
    """A lane whose resubmissions (an event that repeats the state) are marked."""
    marks = [e["at"] for prev, e in itertools.pairwise(events) if e["state"] == prev["state"]]
    return Lane(label, events, live, href, marks)


def span(seconds: float) -> str:
    """A duration as people say it: 4.2 s, 3 m 10 s, 2 h 5 m."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} m" if hours < 48 else f"{hours // 24} d {hours % 24} h"


def timeline(lanes: Sequence[Lane], now: float | None = None) -> Markup:
    """States over time, one lane per job, on one time axis (queued, starting, running, end)."""
    lanes = [ln for ln in lanes if ln.events]
    if not lanes:
        return Markup("")
    now = time.time() if now is None else now
    start = min(ln.events[0]["at"] for ln in lanes)
    end = max(now if ln.live else ln.events[-1]["at"] for ln in lanes)
    scale = (WIDTH - LABEL - 10) / max(end - start, 1e-3)
    height = ROW * len(lanes) + 24

    def x(at: float) -> float:
        return LABEL + (at - start) * scale

    parts = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" role="img"'
        f' aria-label="state timeline" preserveAspectRatio="xMinYMin meet">'
    ]
    for row, ln in enumerate(lanes):
        y = row * ROW + 2
        label = escape(ln.label)
        name = f'<a href="{escape(ln.href)}">{label}</a>' if ln.href else label
        parts.append(f'<text class="lane" x="0" y="{y + 14}">{name}</text>')
        for i, event in enumerate(ln.events):
            last = i + 1 == len(ln.events)
            until = ln.events[i + 1]["at"] if not last else (now if ln.live else event["at"])
            width = max(x(until) - x(event["at"]), 2.0)
            why = f" — {event['detail']}" if event.get("detail") else ""
            parts.append(
                f'<rect class="seg st-{escape(event["state"])}" x="{x(event["at"]):.1f}"'
                f' y="{y}" width="{width:.1f}" height="{ROW - 6}">'
                f"<title>{escape(event['state'])} {span(until - event['at'])}"
                f"{escape(why)}</title></rect>"
            )
        for at in ln.marks:
            parts.append(
                f'<line class="attempt" x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{y - 1}"'
                f' y2="{y + ROW - 3}"><title>new attempt</title></line>'
            )
    axis = height - 6
    parts.append(
        f'<text class="axis" x="{LABEL}" y="{axis}">{time.strftime("%H:%M:%S", time.localtime(start))}</text>'
        f'<text class="axis" x="{WIDTH - 10}" y="{axis}" text-anchor="end">+{span(end - start)}</text>'
        "</svg>"
    )
    return Markup("".join(parts))


def curve(progress: Progress, width: int = 600, height: int = 220) -> Markup:
    """The loss against the step (or, without a loss, the step counter as it advanced)."""
    if progress.has_loss:
        points = [(p.x, p.loss) for p in progress.points if p.loss is not None]
        what = "loss"
    else:
        points = [
            (float(i), float(p.step)) for i, p in enumerate(progress.points) if p.step is not None
        ]
        what = "step"
    if len(points) < 2:  # one point is no curve
        return Markup("")
    left, right, top, bottom = 56, 12, 12, 28
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    sx = (width - left - right) / max(x1 - x0, 1e-9)
    sy = (height - top - bottom) / max(y1 - y0, 1e-9)
    coords = " ".join(
        f"{left + (px - x0) * sx:.1f},{height - bottom - (py - y0) * sy:.1f}" for px, py in points
    )
    last_x, last_y = points[-1]
    x_name = "step" if what == "loss" and progress.last_step is not None else "sample"
    return Markup(
        f'<svg class="curve" viewBox="0 0 {width} {height}" role="img" aria-label="{what} curve"'
        f' data-points="{len(points)}">'
        f'<line class="frame" x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}"/>'
        f'<line class="frame" x1="{left}" y1="{height - bottom}" x2="{width - right}"'
        f' y2="{height - bottom}"/>'
        f'<text class="axis" x="{left - 4}" y="{top + 10}" text-anchor="end">{_num(y1)}</text>'
        f'<text class="axis" x="{left - 4}" y="{height - bottom}" text-anchor="end">{_num(y0)}</text>'
        f'<text class="axis" x="{left}" y="{height - 8}">{x_name} {_num(x0)}</text>'
        f'<text class="axis" x="{width - right}" y="{height - 8}" text-anchor="end">{_num(x1)}</text>'
        f'<polyline class="line" points="{coords}"/>'
        f"<title>{what}: last {_num(last_y)} at {x_name} {_num(last_x)}</title>"
        "</svg>"
    )


def _num(value: float) -> str:
    if value == int(value) and abs(value) < 1e9:
        return str(int(value))
    return f"{value:.4g}"
