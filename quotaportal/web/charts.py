"""Server-rendered SVG line chart of instances in use per share over the last hour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH, HEIGHT, PAD = 640, 180, 28
COLOURS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"]


@dataclass(frozen=True)
class Line:
    share: str
    colour: str
    points: str  # SVG polyline points
    latest: int


@dataclass(frozen=True)
class Chart:
    lines: list[Line]
    top: int  # instances at the top of the y axis
    width: int = WIDTH
    height: int = HEIGHT
    pad: int = PAD


def usage_chart(samples, capacity: dict[str, int], now: datetime, span=timedelta(hours=1)) -> Chart:
    """Step lines from samples ({share: {unit: n}}), each held until the next, up to `now`."""
    start = now - span
    shares = sorted({name for s in samples for name in s.used})
    top = max(
        [sum(capacity.values()), 1] + [sum(u.values()) for s in samples for u in s.used.values()]
    )

    def x(t: datetime) -> float:
        return PAD + (WIDTH - 2 * PAD) * max(0.0, (t - start) / span)

    def y(n: int) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * n / top

    lines = []
    for index, share in enumerate(shares):
        points, value = [], 0
        for sample in samples:
            new = sum(sample.used.get(share, {}).values())
            if points:
                points.append(f"{x(sample.time):.1f},{y(value):.1f}")
            points.append(f"{x(sample.time):.1f},{y(new):.1f}")
            value = new
        points.append(f"{x(now):.1f},{y(value):.1f}")
        lines.append(Line(share, COLOURS[index % len(COLOURS)], " ".join(points), value))
    return Chart(lines, top)
