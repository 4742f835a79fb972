"""Choosing whom to preempt: the minimal set of already-dispatched jobs that makes room.

Victim order (both kinds): lowest scheduling priority first, then the most recently
dispatched, ties broken by the later position in share order. The greedy walk takes
candidates in that order until the preemptor fits, then walks the chosen set backwards and
drops every victim the preemptor turns out not to need.

A borrowing share's borrowed amount U - L is attributed to its jobs in victim order: a job
holding any attributed instance is a *borrowing job* and may be taken across shares whole,
even when that takes its share below its limit (AWS: a share may always take back what it
lent). A job wholly within its share's limit is never a cross-share victim.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from itertools import takewhile

from scheduler.ledger import Ledger
from scheduler.model import Job, Share


def victim_order(job: Job) -> tuple:
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
            jobs.sort(key=victim_order, reverse=True)
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
        self,
        ledger: Ledger,
        share: Share,
        unit: str,
        shortfall: int,
        standing: Mapping[str, float] | None = None,
    ) -> list[Job] | None:
        """Cross-share: borrowing jobs (holding part of their share's borrowed amount). With
        fair share (`standing`), the borrower with the most past use per weight gives first,
        each borrower's jobs in victim order."""
        reclaimed = _Reclaimed(ledger, unit)

        def may_take(job: Job) -> bool:
            # A share's jobs arrive in victim order and each one before was taken, so the job
            # holds an attributed instance exactly while its share still borrows.
            return job.share != share.name and reclaimed.still_borrowed(job.share) > 0

        # Only borrowers' jobs can be taken: walk theirs alone, still in victim order.
        borrowers = sorted(ledger.borrowers.get(unit, set()) - {share.name})
        if not borrowers:
            return None
        order = victim_order
        if standing is not None:  # equal standings keep today's victim order

            def order(job: Job) -> tuple:
                return (standing.get(job.share, 0.0), victim_order(job))

        candidates = heapq.merge(
            *(self._of_share(unit, name) for name in borrowers), key=order, reverse=True
        )
        return _minimal_set(
            candidates, self._gone, may_take, lambda freed: freed >= shortfall, reclaimed
        )

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
        freed = _Freed()
        chosen = _greedy(
            heapq.merge(
                *(self._of_share(unit, n) for n in borrowers), key=victim_order, reverse=True
            ),
            self._gone,
            keeps_owner_at_limit,
            lambda freed: freed >= excess,
            freed,
        )
        taken = {job.id for job in chosen}
        while freed.total < excess:
            job = self._from_share_furthest_over(ledger, unit, left, taken)
            chosen.append(job)
            taken.add(job.id)
            released[job.share] += job.quantity
            freed.add(job)
        return _drop_unneeded(chosen, lambda freed: freed >= excess, freed)

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
        own = self._of_share(head.unit, share.name)
        lower = list(takewhile(lambda job: job.priority < head.priority, own))

        def enough(freed: int) -> bool:
            room = ledger.room_for(share, head, released=freed)
            return room + freed >= head.quantity and ledger.within_ceiling(share, head, freed)

        return _minimal_set(lower, self._gone, _any_job, enough, _Freed())


class _Freed:
    """The instances a set of victims frees, kept up to date as victims are added or dropped."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, job: Job) -> None:
        self.total += job.quantity

    def remove(self, job: Job) -> None:
        self.total -= job.quantity

    def without(self, job: Job) -> int:
        return self.total - job.quantity


class _Reclaimed(_Freed):
    """What victims free for *another* share. A RESERVE share that loses a job straddling its
    limit holds the part below its limit idle for itself again (docs/concepts.md, The
    scheduler), so it gives the preemptor no more than its borrowed amount, whichever of its
    jobs go."""

    def __init__(self, ledger: Ledger, unit: str) -> None:
        super().__init__()
        self.ledger = ledger
        self.unit = unit
        self.taken: dict[str, int] = defaultdict(int)

    def still_borrowed(self, name: str) -> int:
        owner = self.ledger.shares[name]
        return self.ledger.used(owner, self.unit) - self.taken[name] - owner.limit(self.unit)

    def _given(self, name: str, taken: int) -> int:
        owner = self.ledger.shares[name]
        if not owner.reserves_idle:
            return taken
        borrowed = self.ledger.used(owner, self.unit) - owner.limit(self.unit)
        return min(taken, max(0, borrowed))

    def _change(self, job: Job, delta: int) -> int:
        before = self._given(job.share, self.taken[job.share])
        return self._given(job.share, self.taken[job.share] + delta) - before

    def add(self, job: Job) -> None:
        self.total += self._change(job, job.quantity)
        self.taken[job.share] += job.quantity

    def remove(self, job: Job) -> None:
        self.total += self._change(job, -job.quantity)
        self.taken[job.share] -= job.quantity

    def without(self, job: Job) -> int:
        return self.total + self._change(job, -job.quantity)


def _minimal_set(
    candidates: Iterable[Job],
    gone: set[str],
    may_take: Callable[[Job], bool],
    enough: Callable[[int], bool],
    freed: _Freed,
) -> list[Job] | None:
    chosen = _greedy(candidates, gone, may_take, enough, freed)
    if not enough(freed.total):
        return None
    return _drop_unneeded(chosen, enough, freed)


def _greedy(
    candidates: Iterable[Job],
    gone: set[str],
    may_take: Callable[[Job], bool],
    enough: Callable[[int], bool],
    freed: _Freed,
) -> list[Job]:
    """Candidates in order until they free enough (or run out: maybe too few)."""
    chosen: list[Job] = []
    for job in candidates:
        if enough(freed.total):
            break
        if job.id not in gone and may_take(job):
            chosen.append(job)
            freed.add(job)
    return chosen


def _drop_unneeded(chosen: list[Job], enough: Callable[[int], bool], freed: _Freed) -> list[Job]:
    """Walk the chosen set backwards, dropping every victim the rest can do without."""
    for job in reversed(chosen[:]):
        if enough(freed.without(job)):
            chosen.remove(job)
            freed.remove(job)
    return chosen


def _any_job(job: Job) -> bool:
    return True
