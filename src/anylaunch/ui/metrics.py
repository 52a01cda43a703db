"""Training progress read from log lines: the step counter and the loss, when printed.

Programs print them in many shapes (`step 12 loss 0.31`, `step: 12/100, loss=0.31`,
`{'loss': 0.31, ...}`); a curve is worth drawing whenever one of the two is there, and
nothing is asked of the program beyond printing it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_STEP = re.compile(r"(?<![A-Za-z])(?:global_)?step['\"]?\s*[:=#]?\s*(\d+)(?:\s*/\s*(\d+))?", re.I)
_LOSS = re.compile(rf"(?<![A-Za-z])loss['\"]?\s*[:=]?\s*({_NUMBER})", re.I)
MAX_POINTS = 400  # more points than pixels only slows the page


@dataclass(frozen=True)
class Point:
    x: float  # the step, or the line's order when no step is printed
    loss: float | None
    step: int | None


@dataclass(frozen=True)
class Progress:
    points: list[Point]
    total_steps: int | None  # from `step N/M`

    @property
    def has_loss(self) -> bool:
        return any(p.loss is not None for p in self.points)

    @property
    def last_step(self) -> int | None:
        steps = [p.step for p in self.points if p.step is not None]
        return steps[-1] if steps else None


def parse(text: str) -> Progress:
    """Every line that names a step or a loss, in order (thinned to MAX_POINTS)."""
    points: list[Point] = []
    total = None
    for line in text.splitlines():
        step_match = _STEP.search(line)
        loss_match = _LOSS.search(line)
        if step_match is None and loss_match is None:
            continue
        step = int(step_match.group(1)) if step_match else None
        if step_match and step_match.group(2):
            total = int(step_match.group(2))
        try:
            loss = float(loss_match.group(1)) if loss_match else None
        except ValueError:
            loss = None
        if loss is not None and loss != loss:  # NaN: nothing to draw
            loss = None
        points.append(Point(float(step if step is not None else len(points)), loss, step))
    return Progress(_thin(points), total)


def _thin(points: list[Point]) -> list[Point]:
    if len(points) <= MAX_POINTS:
        return points
    stride = len(points) / MAX_POINTS
    kept = [points[int(i * stride)] for i in range(MAX_POINTS)]
    kept[-1] = points[-1]  # the newest point is the one people look for
    return kept
