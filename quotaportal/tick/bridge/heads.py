"""A tick's narrow read: every dispatched job, the first jobs of each share's line, and the
waiting jobs whose stored reason may be wrong now (scheduler.heads plans from it).

PostgreSQL only (a LATERAL read of each share's line, served by the `job_share_line` index);
SQLite, the embedded default for small fleets, reads every active job.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import connection
from psycopg import pq

from quotaportal.quotas.models import HEAD_REASONS, JobQueue
from quotaportal.tick.bridge.capacity import capacity_of
from quotaportal.tick.bridge.snapshot import Loaded, Terms
from scheduler import Job as PlannedJob
from scheduler import Ordering, Plan, Snapshot
from scheduler.heads import Windows, plan_from_heads

_READ = """id, quota_share_id, capacity_unit_id, quantity, scheduling_priority, created_at,
    pending_reason"""
_COLUMNS = """array_agg(j.id::text), array_agg(j.quota_share_id), array_agg(j.capacity_unit_id),
    array_agg(j.quantity), array_agg(j.scheduling_priority),
    array_agg(EXTRACT(EPOCH FROM j.created_at)::float8), array_agg(j.dispatched),
    array_agg(j.pending_reason), array_agg(j.in_line)"""
_HEAD_REASONS = ", ".join(f"'{reason}'" for reason in HEAD_REASONS)  # as the index says

# The dispatched jobs (bounded by the capacity), and the waiting ones no tick has explained
# yet or that were explained as a share's head (the index job_queue_status_reason holds the
# reason after the status): `dispatched` is NULL for the waiting ones.
_HELD = f"""
    SELECT {_READ}, EXTRACT(EPOCH FROM scheduled_at)::float8 AS dispatched, false AS in_line
    FROM quotas_job
    WHERE job_queue_id = %(queue)s AND quota_share_id IS NOT NULL
      AND status IN ('SCHEDULED', 'STARTING', 'RUNNING')
    UNION ALL
    SELECT {_READ}, NULL, false FROM quotas_job
    WHERE job_queue_id = %(queue)s AND status = 'RUNNABLE' AND pending_reason = ''
      AND quota_share_id IS NOT NULL AND NOT preemption_stopping
    UNION ALL
    SELECT {_READ}, NULL, false FROM quotas_job
    WHERE job_queue_id = %(queue)s AND status = 'RUNNABLE'
      AND pending_reason IN ({_HEAD_REASONS}) AND quota_share_id IS NOT NULL
"""

# The first `n` RUNNABLE jobs of each share's line, in share order (job_share_line).
_LINES = f"""
    SELECT line.* FROM unnest(%(shares)s::bigint[], %(windows)s::int[]) AS s(id, n)
    CROSS JOIN LATERAL (
        SELECT {_READ}, NULL::float8 AS dispatched, true AS in_line FROM quotas_job
        WHERE quota_share_id = s.id AND status = 'RUNNABLE' AND NOT preemption_stopping
        ORDER BY scheduling_priority DESC, created_at, id
        LIMIT s.n
    ) line
"""

# A tick's first read is one statement; a widened share's line is read again alone.
FIRST_READ_SQL = f"SELECT {_COLUMNS} FROM ({_HELD} UNION ALL {_LINES}) j"
LINES_SQL = f"SELECT {_COLUMNS} FROM ({_LINES}) j"


def reads_heads(queue: JobQueue) -> bool:
    """Whether a tick of the queue may read the heads of its lines instead of every job:
    with STRICT ordering (every job behind a head waits BEHIND_SHARE_HEAD, so the reasons
    of the jobs it does not read stay true), on PostgreSQL."""
    return connection.vendor == "postgresql" and queue.ordering == Ordering.STRICT


def heads_pay_off(waiting: int, shares: int) -> bool:
    """Whether a queue in which `waiting` jobs waited at its last full read, with `shares`
    shares, costs less read by the heads of its lines than read whole. A heads read walks each
    share's line, a whole read every waiting job: by `manage.py bench_tick`, the heads win
    from 30 to 100 waiting jobs a share (QP_HEADS_FROM_WAITING_PER_SHARE: 50), and at any
    count from QP_HEADS_FROM_WAITING (a queue's reads are bounded however many shares)."""
    per_share = settings.QP_HEADS_FROM_WAITING_PER_SHARE * max(shares, 1)
    return waiting >= min(settings.QP_HEADS_FROM_WAITING, per_share)


def plan_heads(queue: JobQueue, now: datetime, terms: Terms, first: int) -> tuple[Loaded, Plan]:
    """Read the heads (`first` jobs of each line, more where the plan runs short), plan."""
    reader = _HeadReader(queue, now, terms)
    planned = plan_from_heads(reader.read, now.timestamp(), first=first)
    stored = reader.stored_reasons(planned.snapshot)
    return terms.loaded(planned.snapshot, stored, planned.reads), planned.plan


_make_job = partial(tuple.__new__, PlannedJob)


class _HeadReader:
    """Reads the dispatched jobs and the jobs to explain once, and each share's line as far
    as the windows say (a widened share alone is read again)."""

    def __init__(self, queue: JobQueue, now: datetime, terms: Terms):
        self.queue, self.terms = queue, terms
        self.names = terms.names
        self.ids = {name: share_id for share_id, name in self.names.items()}
        self.capacity = capacity_of(queue, now)
        self.reasons: dict[str, str] = {}
        self.dispatched: list[PlannedJob] = []
        self.to_explain: list[PlannedJob] = []
        self.lines: dict[str, list[PlannedJob]] = {}
        self.windows: dict[str, int] = {}

    def read(self, windows: Windows) -> Snapshot:
        wanted = {n: windows[n] for n in self.ids if self.windows.get(n) != windows[n]}
        if wanted:
            self._read(FIRST_READ_SQL if not self.windows else LINES_SQL, wanted)
        more = frozenset(n for n, line in self.lines.items() if len(line) == self.windows[n])
        held = {job.id for line in self.lines.values() for job in line}
        beyond = tuple(job for job in self.to_explain if job.id not in held and job.share in more)
        jobs = [*self.dispatched, *(job for line in self.lines.values() for job in line)]
        return Snapshot(
            self.capacity,
            self.terms.shares,
            tuple(jobs),
            Ordering(self.queue.ordering),
            more_waiting=more,
            beyond=beyond,
            fair_standing=self.terms.standing,
        )

    def _read(self, sql: str, wanted: dict[str, int]) -> None:
        names = sorted(wanted)
        params = {
            "queue": self.queue.pk,
            "shares": [self.ids[n] for n in names],
            "windows": [wanted[n] for n in names],
        }
        with connection.cursor() as cursor:
            cursor.cursor.format = pq.Format.BINARY
            cursor.execute(sql, params)
            (
                ids,
                share_ids,
                unit_ids,
                quantities,
                priorities,
                created,
                dispatched,
                reasons,
                in_line,
            ) = cursor.fetchone()
        for name in names:
            self.lines[name] = []
            self.windows[name] = wanted[name]
        if ids is None:
            return
        self.reasons.update(zip(ids, reasons, strict=True))
        shares = map(self.names.__getitem__, share_ids)
        units = map(self.terms.units.__getitem__, unit_ids)
        fields = zip(ids, shares, units, quantities, priorities, created, dispatched, strict=True)
        for job, line in zip(map(_make_job, fields), in_line, strict=True):
            if line:
                self.lines[job.share].append(job)
            elif job.dispatched_at is not None:
                self.dispatched.append(job)
            else:
                self.to_explain.append(job)

    def stored_reasons(self, snapshot: Snapshot) -> dict[str, str]:
        """The stored reason of every waiting job the plan explains."""
        reasons = self.reasons
        waiting = (
            job.id for job in (*snapshot.jobs, *snapshot.beyond) if job.dispatched_at is None
        )
        return {job_id: reasons[job_id] for job_id in waiting}
