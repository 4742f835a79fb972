"""Independent checks of a plan against the rules no plan may break (docs/concepts.md,
The scheduler).

The checker replays the plan's dispatches in order on a fresh ledger and verifies at each
step: capacity per unit never exceeded, RESERVE idle capacity never taken by another share,
no borrowing on capacity held for jobs preempted in the same tick, borrow ceilings held,
cross-share preemption only by a share within its limit and only of borrowing jobs (those
holding part of their share's borrowed amount U - L, attributed to the share's jobs in victim
order), in-share victims strictly lower in priority, and every RUNNABLE job left with a
pending reason and a position.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from scheduler.ledger import Ledger
from scheduler.model import (
    Dispatch,
    Job,
    Plan,
    Preemption,
    PreemptionKind,
    Share,
    Snapshot,
    job_field,
    runnable_and_dispatched,
)
from scheduler.victims import victim_order

_id = job_field("id")


class InvariantViolation(AssertionError):
    """A plan broke a scheduling invariant; the message lists every violation found."""


def check_plan(
    snapshot: Snapshot, plan: Plan, *, positions: bool = True, pending: bool = True
) -> None:
    """Raise InvariantViolation listing every breach. `positions=False` skips numbering checks,
    which cost a pass over every RUNNABLE job and guard no capacity rule; `pending=False`
    checks a plan made with explain=False, which has no pending reasons at all."""
    violations = plan_violations(snapshot, plan, positions=positions, pending=pending)
    if violations:
        raise InvariantViolation("; ".join(violations))


def plan_violations(
    snapshot: Snapshot, plan: Plan, *, positions: bool = True, pending: bool = True
) -> list[str]:
    return _Replay(snapshot).run(plan, positions, pending)


class _Replay:
    def __init__(self, snapshot: Snapshot):
        self.shares = {s.name: s for s in snapshot.shares}
        self.jobs = dict(zip(map(_id, snapshot.jobs), snapshot.jobs, strict=True))
        runnable, dispatched = runnable_and_dispatched(snapshot.jobs)
        self.dispatched = set(map(_id, dispatched))
        self.runnable = set(map(_id, runnable))
        self.beyond = set(map(_id, snapshot.beyond))  # explained, never planned
        self.ledger = Ledger(snapshot.capacity, self.shares, dispatched)
        self.fit_to = dict(snapshot.fit_to)
        self._by_share_unit: dict[tuple[str, str], list[Job]] | None = None
        self.violations: list[str] = []

    def fail(self, message: str) -> None:
        self.violations.append(message)

    def run(self, plan: Plan, positions: bool, pending: bool = True) -> list[str]:
        if plan.short_of:
            self.fail(f"the plan ran short of the lines of {list(plan.short_of)[:5]}")
        self._check_evictions(plan.evictions)
        for dispatch in plan.dispatches:
            job = self.jobs.get(dispatch.job_id)
            if job is None or dispatch.job_id not in self.runnable:
                self.fail(f"{dispatch.job_id} dispatched but was not RUNNABLE")
                continue
            self._check_dispatch(dispatch, job)
        if pending:
            self._check_pending(plan, positions)
        return self.violations

    def _check_dispatch(self, dispatch: Dispatch, job: Job) -> None:
        share = self.shares[job.share]
        unit = job.unit
        for preemption in dispatch.preempted:
            self._check_preemption(preemption, job, share)
        slack_before = self.ledger.reserve_slack(unit)
        lendable_before = self.ledger.lendable_slack(unit)
        if share.limit(unit) <= 0:
            self.fail(f"{job.id} dispatched on {unit}, for which share {share.name} has no limit")
        if not self.ledger.within_ceiling(share, job):
            self.fail(f"{job.id} takes share {share.name} past its ceiling on {unit}")
        self.ledger.add(job, share)
        self.runnable.discard(job.id)
        self.dispatched.add(job.id)
        if self.ledger.free(unit) < 0:
            self.fail(f"{job.id} puts {unit} over capacity ({self.ledger.free(unit)} free)")
        if self.ledger.reserve_slack(unit) < min(0, slack_before):
            self.fail(f"{job.id} takes idle capacity a RESERVE share holds on {unit}")
        lent_held = self.ledger.lendable_slack(unit) < min(0, lendable_before)
        if lent_held and self.ledger.is_borrowing(share, unit):
            self.fail(f"{job.id} borrows capacity held for jobs preempted this tick on {unit}")
        if dispatch.borrowing != self.ledger.is_borrowing(share, unit):
            self.fail(f"{job.id} borrowing flag is {dispatch.borrowing}, ledger disagrees")

    def _check_evictions(self, evictions: tuple[Preemption, ...]) -> None:
        """Preempted to fit capacity taken away: only on such units, only as many as needed."""
        evicted: list[Job] = []
        for preemption in evictions:
            victim = self.jobs.get(preemption.job_id)
            if victim is None or victim.id not in self.dispatched:
                self.fail(f"{preemption.job_id} preempted but was not dispatched before the tick")
                continue
            if preemption.kind is not PreemptionKind.CAPACITY:
                self.fail(f"{victim.id} preempted with no preemptor but kind {preemption.kind}")
            if victim.unit not in self.fit_to:
                self.fail(f"{victim.id} preempted on {victim.unit}, whose capacity was not cut")
                continue
            self._remove(victim, self.shares[victim.share])
            evicted.append(victim)
        for unit, target in self.fit_to.items():
            if self.ledger.total.get(unit, 0) > target:
                self.fail(f"{unit} still uses {self.ledger.total[unit]} of {target} after fitting")
        for victim in evicted:
            if self.ledger.total.get(victim.unit, 0) + victim.quantity <= self.fit_to[victim.unit]:
                self.fail(f"{victim.id} preempted to fit {victim.unit} but was not needed")

    def _remove(self, victim: Job, owner: Share) -> None:
        self.ledger.preempt(victim, owner)
        self.dispatched.discard(victim.id)
        self.runnable.add(victim.id)

    def _check_preemption(self, preemption: Preemption, preemptor: Job, share: Share) -> None:
        victim = self.jobs.get(preemption.job_id)
        if victim is None or victim.id not in self.dispatched or victim.dispatched_at is None:
            self.fail(f"{preemption.job_id} preempted but was not dispatched before the tick")
            return
        owner = self.shares[victim.share]
        if preemption.kind is PreemptionKind.CROSS_SHARE and not self._is_borrowing_job(victim):
            self.fail(f"cross-share victim {victim.id} holds none of {owner.name}'s borrowed units")
        if preemption.kind is PreemptionKind.IN_SHARE:
            if owner is not share:
                self.fail(f"in-share victim {victim.id} is in another share")
            if victim.priority >= preemptor.priority:
                self.fail(
                    f"in-share victim {victim.id} is not lower in priority than {preemptor.id}"
                )
        elif preemption.kind is PreemptionKind.CROSS_SHARE:
            if owner is share:
                self.fail(f"cross-share victim {victim.id} is in the preemptor's own share")
            if not self.ledger.within_quota(share, preemptor):
                self.fail(f"{preemptor.id} preempts across shares while it would be borrowing")
        if preemption.kind is PreemptionKind.CAPACITY:
            self.fail(f"{victim.id} preempted for capacity by {preemptor.id}")
        self._remove(victim, owner)

    def _is_borrowing_job(self, victim: Job) -> bool:
        """Whether the share's jobs ahead of the victim in victim order, still dispatched,
        leave some of the share's borrowed amount U - L to it."""
        owner = self.shares[victim.share]
        borrowed = self.ledger.used(owner, victim.unit) - owner.limit(victim.unit)
        key = victim_order(victim)
        ahead = sum(
            job.quantity
            for job in self._dispatched_of(victim.share, victim.unit)
            if job.id in self.dispatched and victim_order(job) > key
        )
        return ahead < borrowed

    def _dispatched_of(self, share: str, unit: str) -> list[Job]:
        """The share's jobs on the unit that were dispatched before the tick (grouped in one
        pass over the jobs, the first time a victim is checked)."""
        if self._by_share_unit is None:
            self._by_share_unit = defaultdict(list)
            for job in self.jobs.values():
                if job.dispatched_at is not None:
                    self._by_share_unit[job.share, job.unit].append(job)
        return self._by_share_unit.get((share, unit), [])

    def _check_pending(self, plan: Plan, positions: bool) -> None:
        explained = self.runnable | self.beyond
        if plan.pending.keys() != explained:
            missing = sorted(explained - set(plan.pending))[:5]
            extra = sorted(set(plan.pending) - explained)[:5]
            self.fail(
                f"pending reasons do not match RUNNABLE jobs (missing {missing}, extra {extra})"
            )
            return
        if not positions:
            return
        per_share: dict[str, list[int]] = defaultdict(list)
        for job_id, pending in plan.pending.items():
            per_share[self.jobs[job_id].share].append(pending.position_in_share)
        for name, positions in per_share.items():
            if sorted(positions) != list(range(1, len(positions) + 1)):
                self.fail(f"positions in share {name} are not 1..{len(positions)}")
        queue_positions = Counter(p.position_in_queue for p in plan.pending.values())
        if sorted(queue_positions) != list(range(1, len(plan.pending) + 1)):
            self.fail("positions in the queue are not 1..N")
