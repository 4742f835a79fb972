"""Choosing whom to preempt: the minimal set of already-dispatched jobs that makes room.

Victim order (both kinds): lowest scheduling priority first, then the most recently
dispatched, ties broken by the later position in share order. The greedy walk takes
candidates in that order until the preemptor fits, then walks the chosen set backwards and
drops every victim the preemptor turns out not to need.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import takewhile

from scheduler.ledger import Ledger
from scheduler.model import Job, Share


def _victim_order(job: Job) -> tuple:
    # Sorted in reverse: priority ascending, dispatched_at, created_at and id descending.
    return (-job.priority, job.dispatched_at, job.created_at, job.id)


class VictimPool:
    """The jobs dispatched before this tick, per unit in victim order, built on first use."""

    def __init__(self, dispatched: Iterable[Job]):
        self._by_unit: dict[str, list[Job]] = defaultdict(list)
        for job in dispatched:
            self._by_unit[job.unit].append(job)
        self._sorted: set[str] = set()
        self._by_share: dict[str, dict[str, list[Job]]] = {}
        self._gone: set[str] = set()

    def _in_order(self, unit: str) -> list[Job]:
        jobs = self._by_unit.get(unit, [])
        if unit not in self._sorted:
            jobs.sort(key=_victim_order, reverse=True)
            self._sorted.add(unit)
        return jobs

    def _groups(self, unit: str) -> dict[str, list[Job]]:
        """The unit's jobs per share, each in victim order."""
        if unit not in self._by_share:
            grouped: dict[str, list[Job]] = defaultdict(list)
            for job in self._in_order(unit):
                grouped[job.share].append(job)
            self._by_share[unit] = grouped
        return self._by_share[unit]

    def _of_share(self, unit: str, share: str) -> list[Job]:
        return self._groups(unit).get(share, [])

    def discard(self, job: Job) -> None:
        self._gone.add(job.id)
        # Out of its share's list too, so later searches do not walk past it again (a tick
        # that preempts hundreds would otherwise re-skip every earlier victim each time).
        jobs = self._by_share.get(job.unit, {}).get(job.share)
        if jobs is not None and job in jobs:
            jobs.remove(job)

    def reclaimable(
        self, ledger: Ledger, share: Share, unit: str, shortfall: int
    ) -> list[Job] | None:
        """Cross-share: borrowers' jobs whose loss leaves each share at or above its limit."""
        shares = ledger.shares
        released: dict[str, int] = defaultdict(int)

        def may_take(job: Job) -> bool:
            owner = shares[job.share]
            if owner is share:
                return False
            left = ledger.used(owner, unit) - released[job.share] - job.quantity
            if left < owner.limit(unit):
                return False
            released[job.share] += job.quantity
            return True

        # Only borrowers' jobs can be taken: walk theirs alone, still in victim order.
        borrowers = sorted(ledger.borrowers.get(unit, set()) - {share.name})
        if not borrowers:
            return None
        candidates = heapq.merge(
            *(self._of_share(unit, name) for name in borrowers), key=_victim_order, reverse=True
        )
        return _minimal_set(candidates, self._gone, may_take, lambda freed: freed >= shortfall)

    def to_fit(self, ledger: Ledger, unit: str, excess: int) -> list[Job]:
        """Jobs to preempt so `excess` instances of `unit` go (capacity taken away).

        Borrowed capacity goes first, in the cross-share victim order and never below an
        owner's limit; then, while still over, jobs of the share furthest over its limit
        (highest usage ratio U/L, the mirror of step 1's order; then most instances over its
        limit, then name), each in victim order. The set is made minimal as above.
        """
        shares = ledger.shares
        released: dict[str, int] = defaultdict(int)

        def left(name: str) -> int:
            return ledger.used(shares[name], unit) - released[name]

        def keeps_owner_at_limit(job: Job) -> bool:
            if left(job.share) - job.quantity < shares[job.share].limit(unit):
                return False
            released[job.share] += job.quantity
            return True

        borrowers = sorted(ledger.borrowers.get(unit, set()))
        chosen = _greedy(
            heapq.merge(
                *(self._of_share(unit, n) for n in borrowers), key=_victim_order, reverse=True
            ),
            self._gone,
            keeps_owner_at_limit,
            lambda freed: freed >= excess,
        )
        freed = sum(job.quantity for job in chosen)
        taken = {job.id for job in chosen}
        while freed < excess:
            job = self._from_share_furthest_over(ledger, unit, left, taken)
            chosen.append(job)
            taken.add(job.id)
            released[job.share] += job.quantity
            freed += job.quantity
        return _drop_unneeded(chosen, lambda freed: freed >= excess)

    def _from_share_furthest_over(self, ledger, unit, left, taken) -> Job:
        remaining = {
            name: [j for j in jobs if j.id not in taken and j.id not in self._gone]
            for name, jobs in self._groups(unit).items()
        }

        def over(name: str) -> tuple:
            limit = ledger.shares[name].limit(unit)
            ratio = left(name) / limit if limit else float("inf")
            return (ratio, left(name) - limit, name)

        name = max((n for n, jobs in remaining.items() if jobs), key=over)
        return remaining[name][0]

    def in_share(self, ledger: Ledger, share: Share, head: Job) -> list[Job] | None:
        """In-share: strictly lower-priority jobs of the share whose removal lets the head start."""
        available = ledger.available_to(share, head.unit)
        own = self._of_share(head.unit, share.name)
        lower = list(takewhile(lambda job: job.priority < head.priority, own))

        def enough(freed: int) -> bool:
            return available + freed >= head.quantity and ledger.within_ceiling(share, head, freed)

        return _minimal_set(lower, self._gone, _any_job, enough)


def _minimal_set(
    candidates: Iterable[Job],
    gone: set[str],
    may_take: Callable[[Job], bool],
    enough: Callable[[int], bool],
) -> list[Job] | None:
    chosen = _greedy(candidates, gone, may_take, enough)
    if not enough(sum(job.quantity for job in chosen)):
        return None
    return _drop_unneeded(chosen, enough)


def _greedy(
    candidates: Iterable[Job],
    gone: set[str],
    may_take: Callable[[Job], bool],
    enough: Callable[[int], bool],
) -> list[Job]:
    """Candidates in order until they free enough (or run out: maybe too few)."""
    chosen: list[Job] = []
    freed = 0
    for job in candidates:
        if enough(freed):
            break
        if job.id not in gone and may_take(job):
            chosen.append(job)
            freed += job.quantity
    return chosen


def _drop_unneeded(chosen: list[Job], enough: Callable[[int], bool]) -> list[Job]:
    """Walk the chosen set backwards, dropping every victim the rest can do without."""
    freed = sum(job.quantity for job in chosen)
    for job in reversed(chosen[:]):
        if enough(freed - job.quantity):
            chosen.remove(job)
            freed -= job.quantity
    return chosen


def _any_job(job: Job) -> bool:
    return True
