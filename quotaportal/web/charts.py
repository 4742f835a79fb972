"""Server-rendered SVG chart of instances in use over the last hour, stacked per share.

Stacked areas, so shares with equal use never hide each other, in colours kept apart from the
utilization bars' own/borrowed/lent colours; whole-number y ticks and a tick every 10 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

WIDTH, HEIGHT = 1000, 240
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 12, 28
# Not the bars' blue (own), amber (borrowed) or violet (lent).
COLOURS = ["#0d9488", "#db2777", "#65a30d", "#0891b2", "#a16207", "#be123c", "#475569", "#15803d"]


@dataclass(frozen=True)
class Area:
    share: str
    colour: str
    points: str  # SVG polygon points
    latest: int


@dataclass(frozen=True)
class Tick:
    at: float  # pixel position
    label: str


@dataclass(frozen=True)
class Chart:
    areas: list[Area]
    top: int  # instances at the top of the y axis
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right_edge: int = WIDTH - RIGHT
    bottom_edge: int = HEIGHT - BOTTOM
    top_edge: int = TOP

    @property
    def lines(self) -> list[Area]:  # the legend and the description read these
        return self.areas


def _step(top: int) -> int:
    """A whole-number tick step giving at most about five ticks."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if top / step <= 5:
            return step
    return max(1, top // 5)


def usage_chart(samples, capacity: dict[str, int], now: datetime, span=timedelta(hours=1)) -> Chart:
    """Stacked step areas from samples ({share: {unit: n}}), each held until the next."""
    start = now - span
    shares = sorted({name for s in samples for name in s.used})
    values = {share: [sum(s.used.get(share, {}).values()) for s in samples] for share in shares}
    fractions = [min(1.0, max(0.0, (t - start) / span)) for t in [s.time for s in samples] + [now]]
    x_ticks = [
        (1 - m * 60 / span.total_seconds(), "now" if m == 0 else f"−{m} min")
        for m in range(int(span.total_seconds() // 60), -1, -10)
    ]
    return stacked_chart(fractions, values, sum(capacity.values()), x_ticks)


def replay_chart(series: list[dict], capacity_total: int, span_s: float) -> Chart:
    """A what-if replay's use per share over simulated time ({t, shares: {share: parts}})."""
    span_s = max(span_s, 1e-9)
    shares = sorted({name for point in series for name in point["shares"]})
    values = {
        share: [
            point["shares"].get(share, {}).get("own", 0)
            + point["shares"].get(share, {}).get("borrowed", 0)
            for point in series
        ]
        for share in shares
    }
    fractions = [min(1.0, p["t"] / span_s) for p in series] + [1.0]
    # No label at the right edge: it would be cut off there.
    x_ticks = [(i / 4, _duration_label(span_s * i / 4)) for i in range(4)]
    return stacked_chart(fractions, values, capacity_total, x_ticks)


def _duration_label(seconds: float) -> str:
    if seconds >= 7200:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def stacked_chart(
    fractions: list[float],
    values: dict[str, list[int]],
    capacity_total: int,
    x_ticks: list[tuple[float, str]],
) -> Chart:
    """Stacked step areas: `fractions` are the x positions (0..1) of each sample's start and,
    last, of the end of the chart; values[share][j] holds from sample j to sample j + 1."""
    count = len(fractions) - 1
    totals = [sum(v[j] for v in values.values()) for j in range(count)]
    top = max([capacity_total, 1, *totals])

    def x(fraction: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * fraction

    def y(n: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * n / top

    below = [0] * count
    areas = []
    for index, (share, series) in enumerate(values.items()):
        upper = [b + v for b, v in zip(below, series, strict=True)]
        edge_up, edge_down = [], []
        for j in range(count):
            x0, x1 = x(fractions[j]), x(fractions[j + 1])
            edge_up += [(x0, y(upper[j])), (x1, y(upper[j]))]
            edge_down += [(x0, y(below[j])), (x1, y(below[j]))]
        polygon = edge_up + edge_down[::-1]
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in polygon)
        areas.append(
            Area(share, COLOURS[index % len(COLOURS)], points, series[-1] if series else 0)
        )
        below = upper
    step = _step(top)
    y_ticks = [Tick(y(n), str(n)) for n in range(0, top + 1, step)]
    return Chart(areas, top, y_ticks, [Tick(x(f), label) for f, label in x_ticks])
