"""What a start-time estimate reads of a queue: its dispatched jobs and its first waiting jobs
in the order the queue serves them, each with what its run time is expected from (its time
limit, a SIMULATED job's own duration, how long it has run).

The waiting jobs are one range of the job_queue_waiting index (a queue's RUNNABLE jobs by
priority, then age), so the read stops after `first` rows however long the queue is.
"""

from __future__ import annotations

from datetime import datetime

from quotaportal.quotas.bridge.snapshot import Terms
from quotaportal.quotas.models import DISPATCHED, Job, JobQueue, JobStatus
from scheduler.simulate import WorkJob
from scheduler.simulate.estimate import Known
from scheduler.validation import MIN_PRIORITY

# The order a queue serves its waiting jobs in, as job_queue_waiting holds them.
WAITING_ORDER = ("-scheduling_priority", "created_at", "id")

_FIELDS = (
    "id",
    "quota_share_id",
    "capacity_unit_id",
    "quantity",
    "scheduling_priority",
    "created_at",
    "scheduled_at",
    "started_at",
    "attempt_duration_seconds",
    "simulated_duration_seconds",
)


def read_fronts(queue: JobQueue, terms: Terms, now: datetime, first: int) -> list[Known]:
    """The queue's dispatched jobs, then its first `first` waiting jobs in serving order. A
    preempted job whose ranks still stop is in neither (as in the tick's snapshot)."""
    jobs = Job.objects.filter(job_queue=queue, quota_share__isnull=False, preemption_stopping=False)
    dispatched = jobs.filter(status__in=DISPATCHED).values_list(*_FIELDS)
    waiting = waiting_in_order(queue)
    shares, units, at = terms.names, terms.units, now.timestamp()
    known = [_running(row, shares, units, at) for row in dispatched]
    if first > 0:
        known += [_waiting(row, shares, units) for row in waiting.values_list(*_FIELDS)[:first]]
    return known


def waiting_in_order(queue: JobQueue):
    """The queue's waiting jobs in serving order, read through job_queue_waiting (slice it)."""
    # The priority bound is the index's condition: it lets this read use the index.
    waiting = Job.objects.filter(
        job_queue=queue,
        status=JobStatus.RUNNABLE,
        scheduling_priority__gte=MIN_PRIORITY,
        quota_share__isnull=False,
        preemption_stopping=False,
    )
    return waiting.order_by(*WAITING_ORDER)


def _work(row: tuple, shares: dict, units: dict) -> WorkJob:
    pk, share, unit, quantity, priority, created = row[:6]
    return WorkJob(str(pk), shares[share], units[unit], quantity, priority, created.timestamp(), 0)


def _waiting(row: tuple, shares: dict, units: dict) -> Known:
    limit_s, own_s = row[8:]
    return Known(_work(row, shares, units), None, 0.0, limit_s, own_s)


def _running(row: tuple, shares: dict, units: dict, now: float) -> Known:
    created, scheduled, started, limit_s, own_s = row[5:]
    dispatched_at = (scheduled or started or created).timestamp()
    elapsed = now - started.timestamp() if started else 0.0
    return Known(_work(row, shares, units), dispatched_at, elapsed, limit_s, own_s)
