"""Server-rendered SVG chart of instances in use over a window (15 min to 7 days), stacked
per share.

Stacked areas, so shares with equal use never hide each other. Each share keeps one colour,
the one its card on the dashboard shows beside its name, kept apart from the utilization
bars' own/borrowed/lent colours; whole-number y ticks and at most about six time ticks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

WIDTH, HEIGHT = 1000, 240
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 18, 28  # room for the labels at a phone's larger size
# Not the bars' blue (own), amber (borrowed) or violet (lent).
COLOURS = ["#0d9488", "#db2777", "#65a30d", "#0891b2", "#a16207", "#be123c", "#475569", "#15803d"]


@dataclass(frozen=True)
class Area:
    share: str
    colour: str
    points: str  # SVG polygon points
    latest: int
    opacity: float = 0.75  # paler for a share's borrowed part


@dataclass(frozen=True)
class Tick:
    at: float  # pixel position
    label: str
    anchor: str = "middle"  # "end" at the right edge, so "now" is not cut off


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


MOST_POINTS = 500  # more samples than this are thinned: a point per pixel or two is plenty
TICK_STEPS = (  # (seconds, unit name, unit seconds), the first giving at most ~6 ticks
    (300, "min", 60),
    (600, "min", 60),
    (1800, "min", 60),
    (3600, "h", 3600),
    (4 * 3600, "h", 3600),
    (12 * 3600, "h", 3600),
    (86400, "d", 86400),
)


def share_colours(names) -> dict[str, str]:
    """One colour per share of a queue, by name order: the chart and the share cards agree."""
    return {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(sorted(names))}


def time_ticks(span: timedelta) -> list[tuple[float, str]]:
    """Ticks back from "now" (at the right edge), in whole minutes, hours or days."""
    seconds = span.total_seconds()
    step, unit, size = next(
        (choice for choice in TICK_STEPS if seconds / choice[0] <= 6), TICK_STEPS[-1]
    )
    return [
        (1 - back / seconds, "now" if back == 0 else f"−{back // size:.0f} {unit}")
        for back in range(int(seconds // step) * step, -1, -step)
    ]


def thinned(samples: list, start: datetime, span: timedelta) -> list:
    """At most MOST_POINTS samples: in each slice of the window, the last one (what held at
    its end), so a week of per-tick samples still draws in a few hundred points."""
    if len(samples) <= MOST_POINTS:
        return samples
    width = span / MOST_POINTS
    kept: dict[int, object] = {}
    for sample in samples:
        kept[int((sample.time - start) / width)] = sample
    return list(kept.values())


def usage_chart(
    samples,
    capacity: dict[str, int],
    now: datetime,
    span=timedelta(hours=1),
    colours: dict[str, str] | None = None,
    pale: frozenset[str] = frozenset(),
) -> Chart:
    """Stacked step areas from samples ({share: {unit: n}}), each held until the next."""
    start = now - span
    samples = thinned(samples, start, span)
    shares = sorted({name for s in samples for name in s.used})
    values = {share: [sum(s.used.get(share, {}).values()) for s in samples] for share in shares}
    fractions = [min(1.0, max(0.0, (t - start) / span)) for t in [s.time for s in samples] + [now]]
    colours = colours or share_colours(shares)
    return stacked_chart(
        fractions, values, sum(capacity.values()), time_ticks(span), colours=colours
    )


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
    x_ticks = [(at / span_s, label) for at, label in duration_ticks(span_s)]
    # Narrower than the dashboard's: two sit side by side, and their labels must stay legible.
    return stacked_chart(fractions, values, capacity_total, x_ticks, size=REPLAY_SIZE)


REPLAY_SIZE = (560, 280)
# Round steps of elapsed time (seconds) and how a tick at a multiple of each is written.
DURATION_STEPS = (
    *(1, 2, 5, 10, 15, 30),
    *(60 * minutes for minutes in (1, 2, 5, 10, 15, 30)),
    *(3600 * hours for hours in (1, 2, 3, 6, 12)),
    *(86400 * days for days in (1, 2, 7)),
)


def duration_ticks(span_s: float, most: int = 5) -> list[tuple[float, str]]:
    """Ticks at round elapsed times from 0 (1 min, 2 min, …, never "86 s"): the smallest round
    step giving at most `most` ticks before the end, none so near the end it would be cut."""
    step = next((s for s in DURATION_STEPS if span_s / s <= most), DURATION_STEPS[-1])
    count = int(span_s // step)
    ticks = [i * step for i in range(count + 1)]
    if len(ticks) > 1 and (span_s - ticks[-1]) < step * 0.25:
        ticks.pop()  # too close to the right edge to be read whole
    return [(at, duration_label(at)) for at in ticks]


def duration_label(seconds: float) -> str:
    """An elapsed time in its largest whole unit: 0, 45 s, 90 s → 1 min 30 s, 2 h, 1 d 12 h."""
    if seconds == 0:
        return "0"
    parts = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        whole, seconds = divmod(seconds, size)
        if whole:
            parts.append(f"{whole:.0f} {unit}")
    return " ".join(parts[:2])


def stacked_chart(
    fractions: list[float],
    values: dict[str, list[int]],
    capacity_total: int,
    x_ticks: list[tuple[float, str]],
    colours: dict[str, str] | None = None,
    pale: frozenset[str] = frozenset(),
    size: tuple[int, int] = (WIDTH, HEIGHT),
) -> Chart:
    """Stacked step areas: `fractions` are the x positions (0..1) of each sample's start and,
    last, of the end of the chart; values[share][j] holds from sample j to sample j + 1."""
    count = len(fractions) - 1
    totals = [sum(v[j] for v in values.values()) for j in range(count)]
    top = math.ceil(max([capacity_total, 1, *totals]))

    width, height = size

    def x(fraction: float) -> float:
        return LEFT + (width - LEFT - RIGHT) * fraction

    def y(n: float) -> float:
        return height - BOTTOM - (height - BOTTOM - TOP) * n / top

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
        colour = (colours or {}).get(share) or COLOURS[index % len(COLOURS)]
        opacity = 0.3 if share in pale else 0.75
        areas.append(Area(share, colour, points, series[-1] if series else 0, opacity))
        below = upper
    step = _step(top)
    y_ticks = [Tick(y(n), str(n)) for n in range(0, top + 1, step)]
    x_marks = [Tick(x(f), label, _anchor(f)) for f, label in x_ticks]
    return Chart(
        areas,
        top,
        y_ticks,
        x_marks,
        width=width,
        height=height,
        right_edge=width - RIGHT,
        bottom_edge=height - BOTTOM,
    )


def _anchor(fraction: float) -> str:
    """A label at the left edge starts there and one at the right edge ends there, so
    neither is cut off."""
    if fraction <= 0.001:
        return "start"
    return "end" if fraction >= 0.999 else "middle"
