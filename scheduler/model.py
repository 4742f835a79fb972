"""Plain data in and out of the planner: the snapshot of one job queue and the plan for one tick.

Everything here is immutable and built from the standard library only, so the planner can be
fed by the database bridge, the scenario runner, the benchmarks and property tests alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from itertools import compress
from operator import is_, itemgetter, not_
from typing import NamedTuple


class Strategy(StrEnum):
    """How a quota share's idle capacity is shared (AWS resourceSharingConfiguration.strategy)."""

    RESERVE = "RESERVE"
    LEND = "LEND"
    LEND_AND_BORROW = "LEND_AND_BORROW"


class Ordering(StrEnum):
    """Head-of-line policy inside a share."""

    STRICT = "STRICT"
    BEST_EFFORT = "BEST_EFFORT"


class PreemptionKind(StrEnum):
    CROSS_SHARE = "cross_share"
    IN_SHARE = "in_share"
    # Capacity went away under running jobs (a reservation ended): no preemptor.
    CAPACITY = "capacity"


class PendingReason(StrEnum):
    """Why a RUNNABLE job did not start, in the order the planner checks them."""

    NO_CAPACITY_LIMIT_FOR_UNIT = "NO_CAPACITY_LIMIT_FOR_UNIT"
    EXCEEDS_SHARE_CEILING = "EXCEEDS_SHARE_CEILING"
    BEHIND_SHARE_HEAD = "BEHIND_SHARE_HEAD"
    WAITING_FOR_CAPACITY = "WAITING_FOR_CAPACITY"
    SHARE_AT_LIMIT = "SHARE_AT_LIMIT"
    BORROW_LIMIT_REACHED = "BORROW_LIMIT_REACHED"
    NOTHING_TO_BORROW = "NOTHING_TO_BORROW"


UNLIMITED_BORROW = -1


@dataclass(frozen=True, slots=True)
class Share:
    """A quota share: a virtual queue with per-unit limits and a sharing strategy."""

    name: str
    limits: Mapping[str, int]
    strategy: Strategy = Strategy.LEND
    borrow_limit: int = UNLIMITED_BORROW
    in_share_preemption: bool = False
    enabled: bool = True

    def limit(self, unit: str) -> int:
        return self.limits.get(unit, 0)

    def ceiling(self, unit: str) -> int | None:
        """Most instances of `unit` the share may use; None means only capacity bounds it."""
        limit = self.limits.get(unit, 0)
        if self.strategy is not Strategy.LEND_AND_BORROW:
            return limit
        if self.borrow_limit == UNLIMITED_BORROW:
            return None
        # AWS expresses the borrow limit as a percentage of the limit; partial instances round down.
        return limit + limit * self.borrow_limit // 100

    def could_ever_hold(self, job: Job) -> bool:
        """Can the job start in this share at all, whatever else runs (limits may have been
        lowered since it was submitted)?"""
        limit = self.limits.get(job.unit, 0)
        if limit <= 0:
            return False
        ceiling = self.ceiling(job.unit)
        return ceiling is None or job.quantity <= ceiling

    @property
    def reserves_idle(self) -> bool:
        """A DISABLED share lends its idle capacity whatever its strategy."""
        return self.enabled and self.strategy is Strategy.RESERVE


class Job(NamedTuple):
    """A RUNNABLE job (dispatched_at is None) or a dispatched one (SCHEDULED/STARTING/RUNNING).

    A NamedTuple rather than a dataclass: the control plane builds tens of thousands of these
    per tick straight from database rows, and tuples build at C speed.
    """

    id: str
    share: str
    unit: str
    quantity: int
    priority: int
    created_at: float
    dispatched_at: float | None = None

    @property
    def dispatched(self) -> bool:
        return self.dispatched_at is not None


def job_field(name: str) -> itemgetter:
    """A getter of one Job field by its tuple index: C speed in loops over every job."""
    return itemgetter(Job._fields.index(name))


_dispatched_at = job_field("dispatched_at")
_waits = partial(is_, None)


def runnable_and_dispatched(jobs: Sequence[Job]) -> tuple[list[Job], list[Job]]:
    """The jobs split by whether they are dispatched, each in input order. A tick splits
    100k jobs several times; comprehensions calling a property cost a tenth of a second."""
    waiting = list(map(_waits, map(_dispatched_at, jobs)))
    return list(compress(jobs, waiting)), list(compress(jobs, map(not_, waiting)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One job queue as the planner sees it: capacity per unit, shares, and its active jobs."""

    capacity: Mapping[str, int]
    shares: tuple[Share, ...]
    jobs: tuple[Job, ...]
    ordering: Ordering = Ordering.STRICT
    # Units whose capacity was just taken away (a reservation ended), with the usage this
    # queue must come down to: before anything else the tick preempts dispatched jobs until
    # it fits. Other drops in capacity never preempt; the excess drains as jobs end.
    fit_to: Mapping[str, int] = field(default_factory=dict)
    # A narrow snapshot (scheduler.heads) holds only the first RUNNABLE jobs of each share's
    # line: these shares have more waiting behind the ones it holds ...
    more_waiting: frozenset[str] = frozenset()
    # ... and these are some of them (jobs not explained yet), to be explained, never planned.
    beyond: tuple[Job, ...] = ()
    # With a fair-share policy (scheduler.fairshare): each share's standing, its decayed past
    # use over its weight. Borrowing goes to the lowest first; a lender takes back from the
    # highest first. None: no policy, the plan is today's.
    fair_standing: Mapping[str, float] | None = None


@dataclass(frozen=True, slots=True)
class Preemption:
    job_id: str
    kind: PreemptionKind
    preemptor_id: str


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One job started, after the listed victims were preempted to make room for it."""

    job_id: str
    borrowing: bool = False
    preempted: tuple[Preemption, ...] = ()


class Pending(NamedTuple):
    """Why a job is still RUNNABLE after the tick, and where it stands (1-based positions)."""

    reason: PendingReason
    position_in_share: int
    position_in_queue: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of one tick: dispatches in the order they were decided, and pending reasons."""

    now: float
    dispatches: tuple[Dispatch, ...] = ()
    # Worked out when first read (scheduler.pending.Explanation).
    pending: Mapping[str, Pending] = field(default_factory=dict)
    # Jobs preempted to fit capacity that went away (kind CAPACITY), before any dispatch.
    evictions: tuple[Preemption, ...] = ()
    # Shares of a narrow snapshot whose jobs the plan ran out of while more wait: the plan
    # depends on jobs it was not given, so it must not be applied; plan again with more of
    # these shares' lines (scheduler.heads does).
    short_of: tuple[str, ...] = ()

    @property
    def share_ranking(self) -> tuple[str, ...]:
        """Shares with RUNNABLE jobs in the order the queue serves them; position_in_queue of
        a share's k-th job follows from it and the shares' RUNNABLE counts."""
        return getattr(self.pending, "ranking", ())

    @property
    def preemptions(self) -> tuple[Preemption, ...]:
        return self.evictions + tuple(p for d in self.dispatches for p in d.preempted)

    @property
    def dispatched_ids(self) -> tuple[str, ...]:
        return tuple(d.job_id for d in self.dispatches)
