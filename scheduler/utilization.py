"""How a queue's capacity divides among its shares, for people to read: per share and unit,
what it uses, borrows, lends out and leaves idle. Shared by the dashboard and the simulator's
reports so both attribute lent capacity the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.model import Share, Strategy


def share_breakdown(
    shares: Iterable[Share], used: Mapping[str, Mapping[str, int]], capacity: Mapping[str, int]
) -> dict[str, dict[str, dict[str, int]]]:
    """Per share and unit: used, limit, borrowed (above its limit), lent (its idle capacity in
    use by borrowers), idle and short. Borrowed instances are attributed first to capacity no
    share covers, then to lending shares in name order, so the figures are stable between
    reads. Limits may add up to more than the capacity: only what is really free shows as
    idle; the rest of a share's unused limit is "short" (not there to use right now).
    """
    shares = sorted(shares, key=lambda s: s.name)
    result: dict[str, dict[str, dict[str, int]]] = {s.name: {} for s in shares}
    units = set(capacity) | {u for s in shares for u in s.limits}
    for unit in sorted(units):
        use = {s.name: used.get(s.name, {}).get(unit, 0) for s in shares}
        for name, figures in unit_breakdown(shares, use, unit, capacity.get(unit, 0)).items():
            result[name][unit] = figures
    return result


def unit_breakdown(
    shares: list[Share], use: Mapping[str, int], unit: str, capacity: int
) -> dict[str, dict[str, int]]:
    """share_breakdown for one unit: `shares` sorted by name, `use` their instances in use.
    Shares with neither a limit nor use on the unit are left out."""
    borrowed_total = sum(max(0, use.get(s.name, 0) - s.limit(unit)) for s in shares)
    uncovered = max(0, capacity - sum(s.limit(unit) for s in shares))
    to_attribute = max(0, borrowed_total - uncovered)
    free = max(0, capacity - sum(use.values()))
    result = {}
    for share in shares:
        limit, mine = share.limit(unit), use.get(share.name, 0)
        if not limit and not mine:
            continue
        idle = max(0, limit - mine)
        lends = share.strategy is not Strategy.RESERVE or not share.enabled
        lent = min(idle, to_attribute) if lends else 0
        to_attribute -= lent
        really_idle = min(idle - lent, free)
        free -= really_idle
        result[share.name] = {
            "used": mine,
            "limit": limit,
            "borrowed": max(0, mine - limit),
            "lent": lent,
            "idle": really_idle,
            "short": idle - lent - really_idle,
        }
    return result
