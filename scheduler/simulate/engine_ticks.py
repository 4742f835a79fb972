"""The simulator's ticks: when one is needed, and a narrow plan of only what it can change
(the heads on the units that changed, the borrowers that might be taken back), widened to
what it turned out to need."""

from __future__ import annotations

import math
from collections import defaultdict

from scheduler.invariants import check_plan
from scheduler.model import Job, Ordering, Plan, Share, Snapshot, Strategy
from scheduler.planner import plan_tick
from scheduler.simulate.engine_state import (
    FOLDED_LEND,
    FOLDED_RESERVE,
    WIDENINGS,
    SkipWasWrong,
    _stand_in,
)


class Ticking:
    """QueueSimulation's ticks (a mixin: it reads and writes the simulation's state)."""

    def _tick_if_needed(self) -> None:
        needed = bool((self.dirty or self.preempted_last_tick) and self.runnable)
        touched, self.touched = self.touched, set()
        if not needed and not (self.verify_skips and self.runnable):
            self.run.ticks_skipped += 1
            self.dirty = self.preempted_last_tick = False
            return
        if not needed:
            self.standing = self._fair_standing()
            plan = plan_tick(self._snapshot(), self.now, explain=False)
            self.run.ticks_skipped += 1
            self.dirty = self.preempted_last_tick = False
            if plan.dispatches:
                raise SkipWasWrong(
                    f"a tick skipped at {self.now} would have started "
                    f"{list(plan.dispatched_ids)[:5]}"
                )
            return
        self.standing = self._fair_standing()
        if self.fast and touched:
            snapshot, plan = self._plan_touched(touched)
        else:
            snapshot = self._snapshot()
            plan = plan_tick(snapshot, self.now, explain=False)
        if self.check:
            check_plan(snapshot, plan, positions=False, pending=False)
        self.run.ticks_planned += 1
        self.dirty = False
        self._apply_plan(plan)

    def _plan_touched(self, touched: set[str]) -> tuple[Snapshot, Plan]:
        """Plan only the shares with a job waiting on a unit that changed.

        Since the last tick only jobs ended, leading jobs arrived, jobs started or victims of
        the last tick's preemptions went back to waiting on `touched` units (whose shares'
        other units are touched too: their heads may have changed). Every other share's
        waiting jobs are on units whose ledger did not move, so they are as blocked as they
        were, and stay so unless the plan itself changes their unit. So the plan is widened
        until it needs nothing it was not given: a victim may free more than its preemptor
        needs (the rest may go to a head that did not fit before, or to the victim's own
        share, now further below its ceiling), and a share may go on to start a job on
        another unit (whose heads are then looked at too). After a few widenings, every share.
        """
        freed: dict[str, int] = {}
        also: set[str] = set()
        # Borrowers' jobs are left out (as mere use) until the plan shows a share that might
        # have taken capacity back from them: most ticks need no victims at all.
        with_victims = self.config.ordering is not Ordering.STRICT
        for _ in range(WIDENINGS):
            snapshot = self._snapshot(touched, freed, also, with_victims)
            plan = plan_tick(snapshot, self.now, explain=False)
            jobs = {job.id: job for job in snapshot.jobs}
            if not with_victims and self._may_reclaim_after(jobs, plan):
                with_victims = True
                continue
            victims = [jobs[p.job_id] for p in plan.preemptions]
            needs: dict[str, int] = defaultdict(int)
            for victim in victims:
                needs[victim.unit] += victim.quantity
            elsewhere = {jobs[d.job_id].unit for d in plan.dispatches} - touched
            victim_shares = {victim.share for victim in victims}
            if (
                not elsewhere
                and victim_shares <= also
                and all(n <= freed.get(unit, 0) for unit, n in needs.items())
            ):
                break
            freed = {u: max(needs.get(u, 0), freed.get(u, 0)) for u in {*needs, *freed}}
            also |= victim_shares
            touched = touched | elsewhere
        else:
            self.run.replans += 1
            snapshot = self._snapshot()
            return snapshot, plan_tick(snapshot, self.now, explain=False)
        if self.verify_skips:
            full = plan_tick(self._snapshot(), self.now, explain=False)
            if full.dispatches != plan.dispatches:
                raise SkipWasWrong(f"planning only {sorted(touched)} at {self.now} differs")
        return snapshot, plan

    def _snapshot(
        self,
        units: set[str] | None = None,
        freed: dict | None = None,
        also: set = frozenset(),
        with_victims: bool = True,
    ) -> Snapshot:
        """What the planner sees; with `units`, only the shares with a job waiting on one
        (under STRICT ordering only those whose head may start, with `freed` instances more
        free per unit than now, and the shares in `also` that have jobs waiting), and unless
        `with_victims`, no borrower's jobs as possible victims."""
        if not self.fast:
            jobs = (*self.dispatched.values(), *self.runnable.values())
            return Snapshot(
                dict(self.capacity),
                tuple(self.shares.values()),
                jobs,
                self.config.ordering,
                fair_standing=self.standing,
            )
        jobs: list[Job] = []
        runnable = self.runnable
        borrowed = self._borrowed_units()
        if units is None:
            classes = self.classes
            reclaim_units = None  # any borrower may lose jobs
        else:
            if self.config.ordering is Ordering.STRICT:
                # A STRICT share starts nothing unless its head can.
                planned = self._heads_that_may_start(units, borrowed, freed or {})
                planned |= {name for name in also if name in self.heads}
            else:
                planned = set().union(*(self.waiting_shares[u].keys() for u in units))
            classes = {key: self.classes[key] for s in planned for key in self.share_classes[s]}
            # Borrowers' jobs matter only as victims of a share below its limit on their unit.
            reclaim_units = {
                unit
                for name in planned
                for unit, limit in self.shares[name].limits.items()
                if with_victims and unit in borrowed and self.usage.get((name, unit), 0) < limit
            }
        for (_, unit, quantity), keys in classes.items():
            if keys:
                jobs.extend(
                    runnable[key[2]] for key in keys[: self.capacity.get(unit, 0) // quantity + 1]
                )
        return self._with_passive_shares_folded(jobs, reclaim_units)

    def _borrowed_units(self) -> set[str]:
        return {unit for unit, names in self.borrowers_on.items() if names}

    def _may_reclaim_after(self, jobs: dict[str, Job], plan: Plan) -> bool:
        """Planned without borrowers' jobs, could the plan have differed? Only where a head
        within its limit on a unit someone borrows did not simply fit: it is left waiting,
        or it preempted (a stand-in, or its own share's job) where a reclaim from the real
        borrowers' jobs would have started it."""
        borrowed = self._borrowed_units()
        if not borrowed:
            return False
        # A head that could not take capacity back may have preempted in its own share
        # instead (step 2), where a reclaim would have started it in step 1.
        if any(jobs[d.job_id].unit in borrowed for d in plan.dispatches if d.preempted):
            return True
        started = {d.job_id for d in plan.dispatches}
        added: dict[tuple[str, str], int] = defaultdict(int)
        heads: dict[str, tuple] = {}
        for job in jobs.values():
            if job.id in started:
                added[job.share, job.unit] += job.quantity
            elif job.dispatched_at is None:
                key = (-job.priority, job.created_at, job.id, job)
                if job.share not in heads or key < heads[job.share]:
                    heads[job.share] = key
        for name, (*_, head) in heads.items():
            if head.unit in borrowed:
                used = self.usage.get((name, head.unit), 0) + added[name, head.unit]
                if used + head.quantity <= self.shares[name].limits.get(head.unit, 0):
                    return True
        return False

    def _heads_that_may_start(
        self, units: set[str], borrowed: set[str], freed: dict[str, int]
    ) -> set[str]:
        """Shares whose head, on one of `units`, could start this tick: by fitting the free
        capacity (plus what `freed` says preemptions free), by taking capacity back within
        its limit from a borrower, or by preempting a lower-priority job of its own. Every
        other share is as blocked as at the last tick (a head on an unchanged unit is)."""
        planned = set()
        for unit in units:
            heads = self.heads_on.get(unit)
            if not heads:
                continue
            # At most what is free less the idle capacity reserving shares hold (summed over
            # them, which can only overstate what is left: a share above its limit holds none).
            free = self.capacity.get(unit, 0) - self.total.get(unit, 0)
            free -= max(0, self.reserve_limits_total[unit] - self.reserve_used_total[unit])
            free += freed.get(unit, 0)
            planned.update(self._heads_that_may_start_on(unit, heads, free, unit in borrowed))
        return planned

    def _heads_that_may_start_on(
        self, unit: str, heads: dict[str, Job], free: int, may_reclaim: bool
    ) -> list[str]:
        """The heads on `unit` that may start (see _heads_that_may_start): a head may start
        when it fits the free capacity (a reserving share's own idle capacity added) within
        its ceiling, when it may take capacity back within its limit, or when its share may
        preempt a lower-priority job of its own there. The hottest loop of a busy fleet, so
        each share's terms for the unit come from a table made once."""
        usage, priorities, terms = self.usage, self.priorities, self._head_terms
        found = []
        for name, head in heads.items():
            key = (name, unit)
            limit, ceiling, reserves, in_share = terms.get(key) or self._terms_of(key)
            used = usage.get(key, 0)
            needed = used + head.quantity
            available = free + limit - used if reserves and limit > used else free
            if (
                (needed <= ceiling and head.quantity <= available)
                or (may_reclaim and needed <= limit)
                or (in_share and (running := priorities.get(key)) and min(running) < head.priority)
            ):
                found.append(name)
        return found

    def _terms_of(self, key: tuple[str, str]) -> tuple[int, float, bool, bool]:
        """A share's limit, ceiling (infinite when only capacity bounds it), whether it
        reserves its idle capacity, and whether it preempts in-share, on one unit."""
        share = self.shares[key[0]]
        ceiling = share.ceiling(key[1])
        terms = (
            share.limit(key[1]),
            math.inf if ceiling is None else ceiling,
            share.reserves_idle,
            share.in_share_preemption,
        )
        self._head_terms[key] = terms
        return terms

    def _with_passive_shares_folded(
        self, runnable: list[Job], reclaim_units: set[str] | None
    ) -> Snapshot:
        """The snapshot with every share that has no job waiting (and borrowers that cannot
        lose a job: none of their borrowed units is in `reclaim_units`, where a planned share
        below its limit may take capacity back; None means every unit) folded into two
        stand-ins: one holding the reserving shares' limits and use (their idle capacity stays
        reserved), one holding the others' use. No such share can start a job or lose one, so
        only their totals matter to the plan."""
        keep = {job.share for job in runnable}
        # A borrower stays itself when it may lose jobs, and a reserving share above its limit
        # always (summed into the stand-in it would understate the idle capacity reserved).
        if reclaim_units is None:
            keep.update(self.borrowing)
        else:
            for unit in reclaim_units:
                keep |= self.borrowers_on[unit]
            keep.update(n for n in self.borrowing if n in self.reserving_names)
        jobs = runnable
        shares = []
        reserve_limits = dict(self.reserve_limits_total)
        reserve_used = dict(self.reserve_used_total)
        lend_used = dict(self.lend_used_total)
        waiting = {job.share for job in runnable}
        for name in keep:
            share = self.shares[name]
            shares.append(share)
            mine = self.by_share[name]
            if self._may_lose_jobs(name, name in waiting, reclaim_units):
                jobs.extend(mine.values())
            else:
                # Only its use counts: one stand-in per unit instead of each job.
                jobs.extend(
                    _stand_in(name, unit, n)
                    for unit in self.capacity
                    if (n := self.usage.get((name, unit), 0))
                )
            if share.reserves_idle:
                for unit, limit in share.limits.items():
                    reserve_limits[unit] -= limit
            used = reserve_used if share.reserves_idle else lend_used
            for job in mine.values():
                used[job.unit] -= job.quantity
        if any(reserve_limits.values()):
            shares.append(Share(FOLDED_RESERVE, dict(reserve_limits), Strategy.RESERVE))
            jobs.extend(_stand_in(FOLDED_RESERVE, u, n) for u, n in reserve_used.items() if n)
        if lend_used:
            shares.append(
                Share(FOLDED_LEND, {u: n for u, n in lend_used.items() if n}, Strategy.LEND)
            )
            jobs.extend(_stand_in(FOLDED_LEND, u, n) for u, n in lend_used.items() if n)
        return Snapshot(
            dict(self.capacity),
            tuple(shares),
            tuple(jobs),
            self.config.ordering,
            fair_standing=self.standing,
        )

    def _may_lose_jobs(self, name: str, waiting: bool, reclaim_units: set[str] | None) -> bool:
        """Could a plan preempt one of the share's jobs: for its own waiting head (in-share
        preemption), or to take back what it borrows?"""
        if waiting and self.shares[name].in_share_preemption:
            return True
        return self._reclaimable(self.borrowing.get(name, ()), reclaim_units)

    @staticmethod
    def _reclaimable(borrowed_units, reclaim_units: set[str] | None) -> bool:
        if reclaim_units is None:
            return bool(borrowed_units)
        return not reclaim_units.isdisjoint(borrowed_units)
