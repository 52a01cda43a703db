"""The growth curves of a bench run as one SVG picture, written without a plotting library.

Each panel puts the size of the work on a log axis and milliseconds on a log axis, one
line per measured case, from the rows' raw numbers (`Row.data`, with a "size" in it).
`python -m bench` writes it to docs/bench-scale.svg after the scale rows ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from bench.common import Row

W, H = 420, 300  # one panel
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 34, 44
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def series(rows: Sequence[Row]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """panel title -> line name -> [(size, ms)], from the rows that carry a size."""
    panels: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for row in rows:
        size = row.data.get("size")
        if size is None:
            continue
        if row.group.startswith("scale: store"):
            name = row.case.rsplit(",", 1)[0]
            panels.setdefault("store of N jobs", {}).setdefault(name, []).append(
                (size, row.data["ms"])
            )
        elif "paging_ms" in row.data:
            lines = panels.setdefault("Lepton poll, 1 tracked job in N", {})
            lines.setdefault("label filter (anylaunch)", []).append((size, row.data["ours_ms"]))
            lines.setdefault("paging (before)", []).append((size, row.data["paging_ms"]))
        elif "poll_ms" in row.data:
            lines = panels.setdefault("Slurm array of N tasks (simulated)", {})
            for key, label in (("plan_ms", "array script"), ("poll_ms", "one poll")):
                lines.setdefault(label, []).append((size, row.data[key]))
    return panels


def svg(rows: Sequence[Row], title: str) -> str:
    panels = series(rows)
    width = max(1, len(panels)) * W
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H + 20}"'
        f' font-family="sans-serif" font-size="11">',
        f'<text x="8" y="14" font-size="12">{escape(title)}</text>',
    ]
    for index, (name, lines) in enumerate(sorted(panels.items())):
        out += _panel(index * W, 20, name, lines)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _panel(
    x0: float, y0: float, title: str, lines: dict[str, list[tuple[float, float]]]
) -> list[str]:
    points = [p for line in lines.values() for p in line if p[0] > 0 and p[1] > 0]
    if not points:
        return []
    xs = [math.log10(p[0]) for p in points]
    ys = [math.log10(p[1]) for p in points]
    xlo, xhi = math.floor(min(xs)), math.ceil(max(xs))
    ylo, yhi = math.floor(min(ys)), math.ceil(max(ys))
    xhi, yhi = max(xhi, xlo + 1), max(yhi, ylo + 1)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(size: float) -> float:
        return x0 + LEFT + (math.log10(size) - xlo) / (xhi - xlo) * pw

    def py(value: float) -> float:
        return y0 + TOP + ph - (math.log10(value) - ylo) / (yhi - ylo) * ph

    out = [
        f'<text x="{x0 + LEFT}" y="{y0 + 16}" font-size="12">{escape(title)}</text>',
        f'<rect x="{x0 + LEFT}" y="{y0 + TOP}" width="{pw}" height="{ph}" fill="none"'
        ' stroke="#999"/>',
    ]
    for e in range(xlo, xhi + 1):
        x = px(10**e)
        out.append(
            f'<text x="{x:.1f}" y="{y0 + TOP + ph + 14}" text-anchor="middle">{10**e:,}</text>'
        )
    for e in range(ylo, yhi + 1):
        y = py(10**e)
        out.append(f'<line x1="{x0 + LEFT}" x2="{x0 + LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}"'
                   ' stroke="#eee"/>')  # fmt: skip
        out.append(
            f'<text x="{x0 + LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{10**e:g} ms</text>'
        )
    out.append(f'<text x="{x0 + LEFT + pw / 2}" y="{y0 + H - 6}" text-anchor="middle">N</text>')
    for i, (name, line) in enumerate(sorted(lines.items())):
        colour = COLOURS[i % len(COLOURS)]
        pts = sorted(p for p in line if p[0] > 0 and p[1] > 0)
        path = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [
            f'<circle cx="{px(s):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}"/>' for s, v in pts
        ]
        ly = y0 + TOP + 14 + 14 * i
        out.append(f'<text x="{x0 + LEFT + 8}" y="{ly}" fill="{colour}">{escape(name)}</text>')
    return out
