"""Fair share over time: who borrows next depends on who borrowed most.

A queue may keep a fair-share policy: each share's past use (its borrowed instance-seconds,
or all of it) decays with a half-life, and is divided by the share's weight. That figure, the
share's *standing*, orders borrowing: when several shares want the same idle capacity, the
one with the lowest standing borrows first; when a lender takes capacity back, it takes from
the borrower with the highest standing first. Ties fall back to today's order (oldest job
first; victim order), and without a policy the plan is exactly today's.

    standing(share) = decayed use ÷ weight
    decayed use at t = Σ over past use u at time s of u · 2^(−(t − s) / half-life)

Use at a constant rate r over [t0, t1] adds r · (1 − 2^(−(t1 − t0)/h)) · h / ln 2 at t1, and
what there was at t0 decays by 2^(−(t1 − t0)/h): Decayed below keeps one number per share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Counts(StrEnum):
    BORROWED = "borrowed"  # instance-seconds used beyond the share's limit
    ALL = "all"  # every instance-second used


@dataclass(frozen=True)
class Policy:
    half_life_seconds: float
    counts: Counts = Counts.BORROWED
    weights: Mapping[str, float] = field(default_factory=dict)  # share -> weight (default 1)

    def weight(self, share: str) -> float:
        return self.weights.get(share, 1.0)


def decay_factor(elapsed: float, half_life: float) -> float:
    return 2.0 ** (-max(0.0, elapsed) / half_life)


@dataclass
class Decayed:
    """One share's decayed use, as of `at`."""

    value: float = 0.0
    at: float = 0.0

    def as_of(self, now: float, half_life: float) -> float:
        return self.value * decay_factor(now - self.at, half_life)

    def add_rate(self, rate: float, start: float, end: float, half_life: float) -> None:
        """`rate` instances used from `start` to `end` (start at or after `at`)."""
        if end <= start:
            return
        self.value = self.as_of(start, half_life)
        span = end - start
        kept = 1.0 - decay_factor(span, half_life)
        self.value = self.value * decay_factor(span, half_life)
        self.value += rate * kept * half_life / math.log(2)
        self.at = end


def standings(use: Mapping[str, float], policy: Policy, shares) -> dict[str, float]:
    """Each share's standing: its decayed use divided by its weight."""
    return {name: use.get(name, 0.0) / policy.weight(name) for name in shares}


def jain_index(values) -> float:
    """Jain's fairness index of non-negative amounts: 1 when all equal, 1/n when one has all."""
    values = list(values)
    total = sum(values)
    squares = sum(v * v for v in values)
    if not values or squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


@dataclass
class FairUse:
    """A queue's decayed use per share, counted tick to tick: what a share held after one
    tick's plan counts until the next. The control plane keeps it as JSON with the queue; the
    scenario runners and the simulator keep it in memory."""

    policy: Policy
    used: dict[str, Decayed] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)  # instances counted since `at`

    def standing(self, now: float, names) -> dict[str, float]:
        """Each share's standing now (its use decayed to now, over its weight)."""
        half_life = self.policy.half_life_seconds
        found = {}
        for name in names:
            use = self.used.setdefault(name, Decayed(0.0, now))
            if use.at < now:
                use.add_rate(self.rates.get(name, 0.0), use.at, now, half_life)
            found[name] = use.as_of(now, half_life) / self.policy.weight(name)
        return found

    def count(self, usage: Mapping[str, Mapping[str, int]], limits: Mapping[str, Mapping]) -> None:
        """What each share holds after a plan (`usage` share -> unit -> instances), counted
        until the next tick."""
        self.rates = {}
        for name, units in usage.items():
            limit = limits.get(name, {})
            if self.policy.counts is Counts.BORROWED:
                held = sum(max(0, n - limit.get(unit, 0)) for unit, n in units.items())
            else:
                held = sum(units.values())
            if held:
                self.rates[name] = float(held)

    def forget_all_but(self, names) -> None:
        """Keep the account of these shares only."""
        self.used = {name: use for name, use in self.used.items() if name in names}

    def to_json(self) -> dict:
        return {
            name: [use.value, use.at, self.rates.get(name, 0.0)] for name, use in self.used.items()
        } | {name: [0.0, 0.0, rate] for name, rate in self.rates.items() if name not in self.used}

    @classmethod
    def from_json(cls, policy: Policy, saved: Mapping | None) -> FairUse:
        fair = cls(policy)
        for name, (value, at, rate) in (saved or {}).items():
            fair.used[name] = Decayed(float(value), float(at))
            if rate:
                fair.rates[name] = float(rate)
        return fair
