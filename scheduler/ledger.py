"""Capacity accounting for one tick: who uses what, what is free, and what a share may take.

Terms follow docs/concepts.md, The scheduler. Per capacity unit u: C(u) is the capacity,
U(s, u) a share's usage (instances of its dispatched jobs), F(u) = C(u) - sum U(s, u) the
free capacity. The idle capacity of an ENABLED RESERVE share, max(0, L - U), is never usable
by another share; all other free capacity is lendable. The ledger keeps the sum of reserved
idle capacity per unit up to date on every change so each question below costs O(1).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from scheduler.model import Job, Share


class Ledger:
    def __init__(
        self, capacity: dict[str, int], shares: dict[str, Share], dispatched: Iterable[Job]
    ):
        self.capacity = dict(capacity)
        self.shares = shares
        self.usage: dict[tuple[str, str], int] = defaultdict(int)
        self.total: dict[str, int] = defaultdict(int)
        for job in dispatched:
            self.usage[job.share, job.unit] += job.quantity
            self.total[job.unit] += job.quantity
        self.reserved_idle: dict[str, int] = defaultdict(int)
        for share in shares.values():
            if share.reserves_idle:
                for unit in share.limits:
                    self.reserved_idle[unit] += self._idle(share, unit)
        # Per unit, the shares using more than their limit: only their jobs can be reclaimed,
        # so the victim search looks at them alone instead of at every dispatched job.
        self.borrowers: dict[str, set[str]] = defaultdict(set)
        for (name, unit), used in self.usage.items():
            if used > shares[name].limit(unit):
                self.borrowers[unit].add(name)

    def _idle(self, share: Share, unit: str) -> int:
        return max(0, share.limit(unit) - self.usage.get((share.name, unit), 0))

    def used(self, share: Share, unit: str) -> int:
        return self.usage.get((share.name, unit), 0)

    def free(self, unit: str) -> int:
        return self.capacity.get(unit, 0) - self.total.get(unit, 0)

    def available_to(self, share: Share, unit: str) -> int:
        """F(u) less the idle capacity that *other* reserving shares hold."""
        held_by_others = self.reserved_idle.get(unit, 0)
        if share.reserves_idle:
            held_by_others -= self._idle(share, unit)
        return self.free(unit) - held_by_others

    def reserve_slack(self, unit: str) -> int:
        """Free capacity beyond all reserved idle capacity; never driven below zero by a plan."""
        return self.free(unit) - self.reserved_idle.get(unit, 0)

    def is_borrowing(self, share: Share, unit: str) -> bool:
        return self.used(share, unit) > share.limit(unit)

    def within_quota(self, share: Share, job: Job) -> bool:
        return self.used(share, job.unit) + job.quantity <= share.limit(job.unit)

    def within_ceiling(self, share: Share, job: Job, released: int = 0) -> bool:
        ceiling = share.ceiling(job.unit)
        return ceiling is None or self.used(share, job.unit) - released + job.quantity <= ceiling

    def fits(self, share: Share, job: Job) -> bool:
        """The job can start now without preempting anyone."""
        return (
            share.limit(job.unit) > 0
            and self.within_ceiling(share, job)
            and self.available_to(share, job.unit) >= job.quantity
        )

    def add(self, job: Job, share: Share) -> None:
        self._change(share, job.unit, job.quantity)

    def remove(self, job: Job, share: Share) -> None:
        self._change(share, job.unit, -job.quantity)

    def _change(self, share: Share, unit: str, delta: int) -> None:
        before = self._idle(share, unit) if share.reserves_idle else 0
        self.usage[share.name, unit] += delta
        self.total[unit] += delta
        if self.usage[share.name, unit] > share.limit(unit):
            self.borrowers[unit].add(share.name)
        else:
            self.borrowers[unit].discard(share.name)
        if share.reserves_idle:
            self.reserved_idle[unit] += self._idle(share, unit) - before
