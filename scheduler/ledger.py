"""Capacity accounting for one tick: who uses what, what is free, and what a share may take.

Terms follow docs/concepts.md, The scheduler. Per capacity unit u: C(u) is the capacity,
U(s, u) a share's usage (instances of its dispatched jobs), F(u) = C(u) - sum U(s, u) the
free capacity. The idle capacity of an ENABLED RESERVE share, max(0, L - U), is never usable
by another share; all other free capacity is lendable. The ledger keeps the sum of reserved
idle capacity per unit up to date on every change so each question below costs O(1).

Capacity that this tick's preemptions free below a lending share's limit is *held* for the
rest of the tick: a dispatch within its share's quota may use it, a borrowing one may not.
The share's preempted jobs come back next tick within its quota and would take a borrower
started on it straight back, so lending it for one tick only buys a preemption. (An ENABLED
RESERVE share holds all its idle capacity anyway.)
"""

from __future__ import annotations

from collections import Counter, defaultdict
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
        self.held: dict[str, int] = defaultdict(int)
        self._held_by: dict[tuple[str, str], int] = {}  # each share's part of `held`
        self._usage_before: dict[tuple[str, str], int] = {}
        # Per (share, unit) that lost jobs this tick, how many it lost of each size.
        self._preempted: dict[tuple[str, str], Counter[int]] = defaultdict(Counter)
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

    def lendable_slack(self, unit: str) -> int:
        """Free capacity beyond reserved and held capacity: what borrowing may take."""
        return self.reserve_slack(unit) - self.held.get(unit, 0)

    def room_for(self, share: Share, job: Job, released: int = 0) -> int:
        """The capacity `job` may start on once `released` of its share's instances go:
        held capacity only while the job keeps its share within its limit."""
        room = self.available_to(share, job.unit)
        if self.used(share, job.unit) - released + job.quantity > share.limit(job.unit):
            own = self._held_by.get((share.name, job.unit), 0)
            room -= self.held.get(job.unit, 0) - own
        return room

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
            and self.room_for(share, job) >= job.quantity
        )

    def add(self, job: Job, share: Share) -> None:
        self._change(share, job.unit, job.quantity)

    def preempt(self, job: Job, share: Share) -> None:
        key = (share.name, job.unit)
        self._usage_before.setdefault(key, self.usage.get(key, 0))
        self._preempted[key][job.quantity] += 1
        self._change(share, job.unit, -job.quantity)

    def _held(self, share: Share, unit: str) -> int:
        """What this tick's preemptions freed below the share's limit, as far as the jobs
        it preempted could each come back within quota (for a share that lost some)."""
        if share.reserves_idle:
            return 0
        key = (share.name, unit)
        limit = share.limit(unit)
        idle = max(0, limit - self.usage[key])
        freed = idle - max(0, limit - self._usage_before[key])
        returning = sum(q * n for q, n in self._preempted[key].items() if q <= idle)
        return max(0, min(freed, returning))

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
        key = (share.name, unit)
        if key in self._usage_before:
            held = self._held(share, unit)
            self.held[unit] += held - self._held_by.get(key, 0)
            self._held_by[key] = held
