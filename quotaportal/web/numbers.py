"""Numbers as people read them: durations in their largest two units, instance-hours with
their unit, ratios with a ×. Pages use these (as template filters); exports keep raw values."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

UNITS = (("d", 86400), ("h", 3600), ("min", 60))


def duration(seconds: float | None) -> str:
    """'15 d 3 h', '2 h 5 min', '2 min 10 s', '42 s', '0.4 s'; '—' for None."""
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds < 0:
        return "−" + duration(-seconds)
    if seconds < 9.95:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    for index, (name, size) in enumerate(UNITS):
        if whole >= size:
            first, rest = divmod(whole, size)
            smaller = UNITS[index + 1] if index + 1 < len(UNITS) else ("s", 1)
            second = rest // smaller[1]
            return f"{first} {name}" + (f" {second} {smaller[0]}" if second else "")
    return f"{whole} s"


def starts_in(moment: datetime | None, now: datetime | None = None) -> str:
    """When an estimated start is, from now: 'in about 2 min 10 s'; past its moment the job
    still waits, so 'overdue: expected 2 min ago' (never 'in about 0 minutes')."""
    if moment is None:
        return "no estimate yet"
    left = (moment - (now or timezone.now())).total_seconds()
    if left >= 60:
        return f"in about {duration(round(left / 60) * 60)}"
    if left >= 0:
        return "within a minute"
    return f"overdue: expected {duration(round(-left))} ago, still waiting"


def instance_hours(hours: float | None) -> str:
    """'1,234 instance-hours', '12.5 instance-hours', '0.02 instance-hours'."""
    if hours is None:
        return "—"
    return f"{hours_figure(hours)} instance-hours"


def hours_figure(hours: float | None) -> str:
    """A number of hours with as many digits as people read: '1,234', '12.5', '0.02'."""
    if hours is None:
        return "—"
    hours = float(hours)
    if hours >= 100:
        return f"{hours:,.0f}"
    if hours >= 10:
        return f"{hours:,.1f}"
    return f"{hours:.2f}"


def ratio(value: float | None) -> str:
    """'1.29×'."""
    return "—" if value is None else f"{float(value):.2f}×"


def percent(fraction: float | None) -> str:
    """'42 %', '3.5 %', '0.2 %' (a fraction as a percentage people read)."""
    if fraction is None:
        return "—"
    value = float(fraction) * 100
    if value >= 10 or value == 0:
        return f"{value:.0f} %"
    return f"{value:.1f} %"
