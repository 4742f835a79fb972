"""Database rows -> scheduler dataclasses: a job queue's shares, terms and snapshot.

load_snapshot reads a job queue into a scheduler.Snapshot with one query for the active
jobs (built at C speed); its capacity comes from bridge.capacity.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from itertools import chain, compress, repeat
from operator import is_, is_not

from django.db import connection
from psycopg import pq

from quotaportal.quotas.models import (
    DISPATCHED,
    CapacityUnit,
    Job,
    JobQueue,
    JobStatus,
    QuotaShare,
    ShareCapacityLimit,
    State,
)
from quotaportal.tick.bridge.capacity import capacity_of, fit_targets
from scheduler import Job as PlannedJob
from scheduler import Ordering, Plan, Share, Snapshot, Strategy
from scheduler.model import job_field


def share_of(share: QuotaShare, limits: dict[str, int] | None = None) -> Share:
    if limits is None:
        limits = {
            lim.capacity_unit.name: lim.max_capacity
            for lim in share.capacity_limits.select_related("capacity_unit")
        }
    return scheduler_share(
        share.name,
        limits,
        share.sharing_strategy,
        share.borrow_limit,
        share.in_share_preemption,
        share.state,
    )


def scheduler_share(name, limits, strategy, borrow_limit, in_share_preemption, state) -> Share:
    """A share's terms (as stored: strategy text, state text) as the scheduler's Share."""
    return Share(
        name,
        limits,
        Strategy(strategy),
        borrow_limit,
        bool(in_share_preemption),  # SQLite's raw rows say 0 or 1
        state == State.ENABLED,
    )


def timestamp(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


@dataclass
class Loaded:
    """A snapshot plus what the rows said about pending state, to write only what changed."""

    snapshot: Snapshot
    pending: dict[str, str]  # RUNNABLE job id -> stored pending reason
    share_ids: dict[str, int]
    share_ranks: dict[str, int | None]
    terms: str = ""  # Terms.digest
    reads: int = 1  # snapshots read: a plan from the heads may widen and read again

    @property
    def full(self) -> bool:
        """Whether it holds every active job (not only the heads of the shares' lines)."""
        return not self.snapshot.more_waiting


def share_limits(queue: JobQueue, unit_names: dict[int, str] | None = None) -> dict:
    """Every share's capacity limits in the queue, in one query: share id -> unit -> count.
    The names of the units seen are added to `unit_names` (unit id -> name) when given."""
    limits: dict[int, dict[str, int]] = defaultdict(dict)
    for share_id, unit_id, unit, count in ShareCapacityLimit.objects.filter(
        share__job_queue=queue
    ).values_list("share_id", "capacity_unit_id", "capacity_unit__name", "max_capacity"):
        limits[share_id][unit] = count
        if unit_names is not None:
            unit_names[unit_id] = unit
    return limits


# The queue's shares with their limits, by name: one statement where the ORM took two.
SHARES_SQL = """
    SELECT s.id, s.name, s.queue_rank, s.sharing_strategy, s.borrow_limit,
        s.in_share_preemption, s.state, l.capacity_unit_id, u.name, l.max_capacity
    FROM quotas_quotashare s
    LEFT JOIN quotas_sharecapacitylimit l ON l.share_id = s.id
    LEFT JOIN quotas_capacityunit u ON u.id = l.capacity_unit_id
    WHERE s.job_queue_id = %s
    ORDER BY s.name
"""


@dataclass
class _ShareRow:
    id: int
    rank: int | None
    share: Share


def _queue_shares(queue_id: int, unit_names: dict[int, str]) -> list[_ShareRow]:
    """The queue's shares in name order; the units their limits name go into `unit_names`."""
    with connection.cursor() as cursor:
        cursor.execute(SHARES_SQL, [queue_id])
        rows = cursor.fetchall()
    fields, limits = {}, defaultdict(dict)
    for share_id, *share_fields, unit_id, unit, count in rows:
        fields[share_id] = share_fields
        if unit_id is not None:
            limits[share_id][unit] = count
            unit_names[unit_id] = unit
    return [
        _ShareRow(share_id, rank, scheduler_share(name, limits[share_id], *rest))
        for share_id, (name, rank, *rest) in fields.items()
    ]


@dataclass
class Terms:
    """A queue's shares as the planner sees them, and a digest of what the reasons of jobs
    behind the shares' heads depend on: the queue's ordering and the units each share has a
    limit for (BEHIND_SHARE_HEAD, or NO_CAPACITY_LIMIT_FOR_UNIT). A tick that reads only the
    heads explains the others by it, so a new digest brings a full plan."""

    rows: list[_ShareRow]
    units: _UnitNames
    digest: str
    # Each share's fair-share standing for this tick (bridge.fairness); None: no policy.
    standing: dict[str, float] | None = None

    @property
    def shares(self) -> tuple[Share, ...]:
        return tuple(row.share for row in self.rows)

    @property
    def names(self) -> dict[int, str]:
        return {row.id: row.share.name for row in self.rows}

    def loaded(self, snapshot: Snapshot, pending: dict[str, str], reads: int = 1) -> Loaded:
        return Loaded(
            snapshot,
            pending,
            {r.share.name: r.id for r in self.rows},
            {r.share.name: r.rank for r in self.rows},
            self.digest,
            reads,
        )


def queue_terms(queue: JobQueue) -> Terms:
    units = _UnitNames()
    rows = _queue_shares(queue.id, units)
    terms = [
        (r.id, r.share.name, sorted(u for u, n in r.share.limits.items() if n > 0)) for r in rows
    ]
    digest = hashlib.sha256(repr((queue.ordering, terms)).encode()).hexdigest()
    return Terms(rows, units, digest)


def load_snapshot(
    queue: JobQueue,
    now: datetime | None = None,
    fit_units: set[str] = frozenset(),
    terms: Terms | None = None,
) -> Loaded:
    """Every active job of the queue (a full plan's read)."""
    terms = terms or queue_terms(queue)
    jobs, pending = _active_jobs(queue.id, terms.names, terms.units)
    snapshot = Snapshot(
        capacity_of(queue, now),
        terms.shares,
        tuple(jobs),
        Ordering(queue.ordering),
        fit_targets(queue, fit_units, now) if fit_units else {},
        fair_standing=terms.standing,
    )
    return terms.loaded(snapshot, pending)


class _UnitNames(dict):
    """Unit id -> name, as the share limits name them; a unit no share has a limit for (its
    jobs wait with NO_CAPACITY_LIMIT_FOR_UNIT) costs one query for every unit."""

    def __missing__(self, unit_id: int) -> str:
        self.update(CapacityUnit.objects.values_list("id", "name"))
        return self[unit_id]


# Ids, not names: joining the shares costs more than the rest of the read when PostgreSQL
# misjudges the row count (a nested loop of 100k index lookups); names are mapped in Python.
# One row of one array per column, sent in binary: at 100k jobs, turning a row per job into
# Python values cost more than PostgreSQL took to find them, and the columns are what
# _active_jobs zips anyway. An empty queue gives one row of NULLs.
ACTIVE_JOBS_SQL = """
    SELECT array_agg(j.id::text), array_agg(j.quota_share_id), array_agg(j.capacity_unit_id),
           array_agg(j.quantity), array_agg(j.scheduling_priority),
           array_agg(EXTRACT(EPOCH FROM j.created_at)::float8),
           array_agg(CASE WHEN j.status = 'RUNNABLE' THEN NULL
                          ELSE EXTRACT(EPOCH FROM j.scheduled_at)::float8 END),
           array_agg(j.pending_reason)
    FROM quotas_job j
    WHERE j.job_queue_id = %s AND j.quota_share_id IS NOT NULL
      AND j.status IN ('RUNNABLE', 'SCHEDULED', 'STARTING', 'RUNNING')
      AND NOT j.preemption_stopping
"""


# The columns a scheduler job is made of, in its fields' order (the share and unit by id).
PLANNED_JOB_FIELDS = (
    "id",
    "quota_share_id",
    "capacity_unit_id",
    "quantity",
    "scheduling_priority",
    "created_at",
)


def active_columns(queue_id: int) -> tuple[list, ...]:
    """The queue's active jobs, one list per column: ids, share ids, unit ids, quantities,
    priorities, created, dispatched (None while RUNNABLE) and pending reasons. A preempted job
    whose ranks still stop is in none: its capacity is its preemptor's, and it may not start
    again before they have stopped."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.cursor.format = pq.Format.BINARY  # psycopg: for this cursor's results
            cursor.execute(ACTIVE_JOBS_SQL, [queue_id])
            columns = cursor.fetchone()
        return columns if columns[0] is not None else _no_columns()
    rows = Job.objects.filter(
        job_queue_id=queue_id,
        quota_share__isnull=False,
        status__in=(JobStatus.RUNNABLE, *DISPATCHED),
        preemption_stopping=False,
    ).values_list(*PLANNED_JOB_FIELDS, "scheduled_at", "status", "pending_reason")
    converted = [
        (
            str(r[0]),
            r[1],
            r[2],
            r[3],
            r[4],
            r[5].timestamp(),
            None if r[7] == JobStatus.RUNNABLE else timestamp(r[6] or r[5]),
            r[8],
        )
        for r in rows
    ]
    return tuple(map(list, zip(*converted, strict=True))) or _no_columns()


def _no_columns() -> tuple[list, ...]:
    """active_columns of a queue with no active jobs: eight empty lists (not one eight times)."""
    return tuple([] for _ in range(8))


_make_job = partial(tuple.__new__, PlannedJob)
_is_runnable = partial(is_, None)
_job_id, _dispatched_at = job_field("id"), job_field("dispatched_at")


def _active_jobs(
    queue_id: int, share_names: dict[int, str], unit_names: dict[int, str]
) -> tuple[list[PlannedJob], dict]:
    """Build the scheduler's jobs straight from the columns at C speed (the hot part of a
    tick), naming shares and units by id: the rows are read without joining their tables."""
    ids, share_ids, unit_ids, quantities, priorities, created, dispatched, reasons = active_columns(
        queue_id
    )
    shares = map(share_names.__getitem__, share_ids)
    units = map(unit_names.__getitem__, unit_ids)
    fields = zip(ids, shares, units, quantities, priorities, created, dispatched, strict=True)
    jobs = list(map(_make_job, fields))
    pending = dict(compress(zip(ids, reasons, strict=True), map(_is_runnable, dispatched)))
    return jobs, pending


def usage_after(snapshot: Snapshot, plan: Plan | None) -> dict[str, dict[str, int]]:
    """Instances in use per share and unit once the plan is applied (None: as it stands).

    Picks the jobs that count at C speed: a 100k snapshot holds a few thousand of them, and a
    dict of every job to look up the plan's starts cost more than the sums."""
    jobs = snapshot.jobs
    gone = {p.job_id for p in plan.preemptions} if plan else set()
    starting = {d.job_id for d in plan.dispatches} if plan else set()
    dispatched = compress(jobs, map(is_not, map(_dispatched_at, jobs), repeat(None)))
    started = compress(jobs, map(starting.__contains__, map(_job_id, jobs)))
    usage: dict[str, dict[str, int]] = defaultdict(dict)
    for job in chain((j for j in dispatched if j.id not in gone), started):
        usage[job.share][job.unit] = usage[job.share].get(job.unit, 0) + job.quantity
    return dict(usage)
