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
    totals = [sum(sum(u.values()) for u in s.used.values()) for s in samples]
    top = max([sum(capacity.values()), 1, *totals])

    def x(t: datetime) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * min(1.0, max(0.0, (t - start) / span))

    def y(n: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * n / top

    times = [s.time for s in samples] + [now]
    below = [0] * len(samples)
    areas = []
    for index, share in enumerate(shares):
        values = [sum(s.used.get(share, {}).values()) for s in samples]
        upper = [b + v for b, v in zip(below, values, strict=True)]
        edge_up, edge_down = [], []
        for j in range(len(samples)):
            x0, x1 = x(times[j]), x(times[j + 1])
            edge_up += [(x0, y(upper[j])), (x1, y(upper[j]))]
            edge_down += [(x0, y(below[j])), (x1, y(below[j]))]
        polygon = edge_up + edge_down[::-1]
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in polygon)
        areas.append(
            Area(share, COLOURS[index % len(COLOURS)], points, values[-1] if values else 0)
        )
        below = upper
    step = _step(top)
    y_ticks = [Tick(y(n), str(n)) for n in range(0, top + 1, step)]
    x_ticks = [
        Tick(x(now - timedelta(minutes=m)), "now" if m == 0 else f"−{m} min")
        for m in range(int(span.total_seconds() // 60), -1, -10)
    ]
    return Chart(areas, top, y_ticks, x_ticks)
