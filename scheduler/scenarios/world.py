"""What a scenario plays against: the World protocol, and the pure in-memory world.

The pure world keeps the job lifecycle a scenario needs (RUNNABLE, dispatched, SUCCEEDED,
FAILED, preemption counts and retries) and runs `plan_tick` with its invariant check on every
tick. The control plane provides a second World backed by the database; the runner drives
both through the same five verbs and compares what they observe.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.dependencies import After, Waiting, release
from scheduler.fairshare import Counts, Decayed, FairUse, Policy
from scheduler.invariants import plan_violations
from scheduler.model import Job, Ordering, Plan, PreemptionKind, Share, Snapshot, Strategy
from scheduler.planner import plan_tick
from scheduler.reservations import Reservation, capacity_at, ended, most_capacity
from scheduler.scenarios.format import START_TIME, FairShareSpec, ShareSpec
from scheduler.validation import priority_error, share_config_errors, submission_error

DISPATCHED = "DISPATCHED"
RUNNABLE = "RUNNABLE"
PENDING = "PENDING"  # waiting on its dependencies: in no plan
FINAL = ("SUCCEEDED", "FAILED")


class StepRejected(Exception):
    """A step the world refused, with the message a user would see."""


@dataclass
class Observation:
    """The state a scenario's `expect` step is checked against. Keys are scenario job names."""

    status: dict[str, str]  # RUNNABLE, DISPATCHED, SUCCEEDED or FAILED
    usage: dict[str, dict[str, int]]
    pending_reason: dict[str, str]
    preempted_count: dict[str, int]
    last_preempted: dict[str, str]  # job -> PreemptionKind value, from the most recent tick
    violations: list[str] = field(default_factory=list)  # invariant breaches in the last tick


class World(Protocol):
    def submit(
        self,
        now: float,
        job: str,
        share: str,
        unit: str,
        quantity: int,
        priority: int,
        preemption_retries: int | None,
        after: list[tuple[str, str]] = (),
    ) -> None: ...
    def tick(self, now: float) -> None: ...
    def set_priority(self, now: float, job: str, priority: int) -> None: ...
    def finish(self, now: float, job: str, status: str) -> None: ...
    def terminate(self, now: float, job: str) -> None: ...
    def update_share(self, now: float, share: str, changes: dict) -> None: ...
    def set_capacity(self, now: float, capacity: dict[str, int]) -> None: ...
    def reserve(self, now: float, reservation: Reservation) -> None: ...
    def observe(self) -> Observation: ...


def share_from_spec(spec: ShareSpec) -> Share:
    return Share(
        spec.name,
        dict(spec.limits),
        spec.strategy,
        spec.borrow_limit,
        spec.in_share_preemption,
        spec.enabled,
    )


def apply_share_changes(share: Share, changes: dict) -> Share:
    """A share with an admin's edits applied, or StepRejected naming the broken rule."""
    strategy = changes.get("strategy", share.strategy)
    borrow_limit = changes.get("borrow_limit")
    if borrow_limit is None:
        # Leaving LEND_AND_BORROW drops the borrow limit, which no other strategy may carry.
        borrow_limit = share.borrow_limit if strategy == Strategy.LEND_AND_BORROW else -1
    limits = changes.get("limits", share.limits)
    errors = share_config_errors(limits, strategy, borrow_limit)
    if "state" in changes and changes["state"] not in ("ENABLED", "DISABLED"):
        errors["state"] = "state must be ENABLED or DISABLED"
    if errors:
        raise StepRejected("; ".join(f"{k}: {v}" for k, v in errors.items()))
    return dataclasses.replace(
        share,
        limits=dict(limits),
        strategy=Strategy(strategy),
        borrow_limit=borrow_limit,
        in_share_preemption=bool(changes.get("in_share_preemption", share.in_share_preemption)),
        enabled=changes.get("state", "ENABLED" if share.enabled else "DISABLED") == "ENABLED",
    )


def fair_use_of(spec: FairShareSpec | None) -> FairUse | None:
    """A scenario's fair-share policy, each share's history its decayed use at the start."""
    if spec is None:
        return None
    policy = Policy(spec.half_life, Counts(spec.counts), dict(spec.weights))
    fair = FairUse(policy)
    for name, value in spec.history.items():
        fair.used[name] = Decayed(value, START_TIME)
    return fair


@dataclass
class _JobState:
    job: Job
    status: str = RUNNABLE
    preempted_count: int = 0
    preemption_retries: int | None = None
    after: tuple[tuple[str, After], ...] = ()  # while PENDING: what it waits for


class PureWorld:
    """Scenario world on the pure scheduler: no database, no Django."""

    def __init__(
        self,
        capacity: dict[str, int],
        shares: list[ShareSpec],
        ordering: Ordering,
        fair_share: FairShareSpec | None = None,
    ):
        self.fair = fair_use_of(fair_share)
        self.capacity = dict(capacity)
        self.ordering = ordering
        self.shares = {spec.name: share_from_spec(spec) for spec in shares}
        self.jobs: dict[str, _JobState] = {}
        self.last_preempted: dict[str, str] = {}
        self.pending_reason: dict[str, str] = {}  # as the last tick left them
        self.last_plan: Plan | None = None
        self.violations: list[str] = []
        self.reservations: list[Reservation] = []
        self.settled: set[str] = set()  # ended reservations a tick already fitted to

    def _job(self, name: str) -> _JobState:
        try:
            return self.jobs[name]
        except KeyError:
            raise StepRejected(f"no job named {name}") from None

    def submit(self, now, job, share, unit, quantity, priority, preemption_retries, after=()):
        if job in self.jobs:
            raise StepRejected(f"a job named {job} was already submitted")
        unknown = sorted(name for name, _ in after if name not in self.jobs)
        if unknown:
            raise StepRejected(f"it depends on jobs that do not exist: {', '.join(unknown)}")
        if share not in self.shares:
            raise StepRejected(f"quota share {share} does not exist")
        error = priority_error(priority) or submission_error(
            self.shares[share], unit, quantity, most_capacity(self.capacity, self.reservations, now)
        )
        if error:
            raise StepRejected(error)
        self.jobs[job] = _JobState(
            Job(job, share, unit, quantity, priority, now),
            status=PENDING if after else RUNNABLE,
            preemption_retries=preemption_retries,
            after=tuple((name, After(kind)) for name, kind in after),
        )

    @classmethod
    def of(cls, scenario) -> PureWorld:
        return cls(scenario.capacity, list(scenario.shares), scenario.ordering, scenario.fair_share)

    def snapshot(self, now: float) -> Snapshot:
        active = tuple(s.job for s in self.jobs.values() if s.status in (RUNNABLE, DISPATCHED))
        capacity = capacity_at(self.capacity, self.reservations, now)
        just_ended = [r for r in ended(self.reservations, now) if r.name not in self.settled]
        fit_to = {r.unit: capacity.get(r.unit, 0) for r in just_ended}
        standing = self.fair.standing(now, self.shares) if self.fair else None
        return Snapshot(
            capacity,
            tuple(self.shares.values()),
            active,
            self.ordering,
            fit_to,
            fair_standing=standing,
        )

    def tick(self, now):
        self._release()
        snapshot = self.snapshot(now)
        plan = self.last_plan = plan_tick(snapshot, now)
        self.settled.update(r.name for r in ended(self.reservations, now))
        self.violations = plan_violations(snapshot, plan)
        self.pending_reason = {job_id: p.reason.value for job_id, p in plan.pending.items()}
        self.last_preempted = {}
        for eviction in plan.evictions:
            self._preempt(eviction.job_id, eviction.kind)
        for dispatch in plan.dispatches:
            for preemption in dispatch.preempted:
                self._preempt(preemption.job_id, preemption.kind)
            state = self.jobs[dispatch.job_id]
            state.job = state.job._replace(dispatched_at=now)
            state.status = DISPATCHED
        if self.fair:
            limits = {name: share.limits for name, share in self.shares.items()}
            self.fair.count(self.observe().usage, limits)

    def _release(self) -> None:
        """Pending jobs whose dependencies are met go RUNNABLE; unmeetable ones FAIL."""
        pending = [
            Waiting(name, state.after)
            for name, state in self.jobs.items()
            if state.status == PENDING
        ]
        statuses = {name: state.status for name, state in self.jobs.items()}
        released = release(pending, statuses, {name: name for name in self.jobs}, {})
        for name in released.released:
            self.jobs[name].status = RUNNABLE
        for name in released.failed:
            self.jobs[name].status = "FAILED"

    def _preempt(self, name: str, kind: PreemptionKind) -> None:
        state = self.jobs[name]
        state.job = state.job._replace(dispatched_at=None)
        state.preempted_count += 1
        retries = state.preemption_retries
        state.status = (
            "FAILED" if retries is not None and state.preempted_count > retries else RUNNABLE
        )
        self.last_preempted[name] = kind.value

    def set_priority(self, now, job, priority):
        state = self._job(job)
        if state.status in FINAL:
            raise StepRejected(f"job {job} is {state.status}; its priority can no longer change")
        if error := priority_error(priority):
            raise StepRejected(error)
        state.job = state.job._replace(priority=priority)

    def finish(self, now, job, status):
        state = self._job(job)
        if state.status != DISPATCHED:
            raise StepRejected(f"job {job} is {state.status}, only a dispatched job can finish")
        state.status = status
        state.job = state.job._replace(dispatched_at=None)

    def terminate(self, now, job):
        state = self._job(job)
        if state.status in FINAL:
            raise StepRejected(f"job {job} is already {state.status}")
        state.status = "FAILED"

    def update_share(self, now, share, changes):
        if share not in self.shares:
            raise StepRejected(f"quota share {share} does not exist")
        self.shares[share] = apply_share_changes(self.shares[share], changes)

    def set_capacity(self, now, capacity):
        self.capacity.update(capacity)

    def reserve(self, now, reservation):
        if any(r.name == reservation.name for r in self.reservations):
            raise StepRejected(f"a reservation named {reservation.name} already exists")
        self.reservations.append(reservation)

    def observe(self) -> Observation:
        usage: dict[str, dict[str, int]] = {name: {} for name in self.shares}
        for state in self.jobs.values():
            if state.status == DISPATCHED:
                per_unit = usage[state.job.share]
                per_unit[state.job.unit] = per_unit.get(state.job.unit, 0) + state.job.quantity
        return Observation(
            status={name: s.status for name, s in self.jobs.items()},
            usage=usage,
            pending_reason={
                name: reason
                for name, reason in self.pending_reason.items()
                if self.jobs[name].status == RUNNABLE
            },
            preempted_count={name: s.preempted_count for name, s in self.jobs.items()},
            last_preempted=dict(self.last_preempted),
            violations=list(self.violations),
        )
