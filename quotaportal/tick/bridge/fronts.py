"""What a start-time estimate reads of a queue: its dispatched jobs and its first waiting jobs
in the order the queue serves them, each with what its run time is expected from (its time
limit, a SIMULATED job's own duration, how long it has run).

The waiting jobs are one range of the job_queue_waiting index (a queue's RUNNABLE jobs by
priority, then age), so the read stops after `first` rows however long the queue is.
"""

from __future__ import annotations

from datetime import datetime

from quotaportal.quotas.models import DISPATCHED, Job, JobQueue, JobStatus
from quotaportal.tick.bridge.snapshot import PLANNED_JOB_FIELDS, Terms
from scheduler.simulate import WorkJob
from scheduler.simulate.estimate import Known
from scheduler.validation import MIN_PRIORITY

# The order a queue serves its waiting jobs in, as job_queue_waiting holds them.
WAITING_ORDER = ("-scheduling_priority", "created_at", "id")

_FIELDS = (
    *PLANNED_JOB_FIELDS,
    "scheduled_at",
    "started_at",
    "attempt_duration_seconds",
    "simulated_duration_seconds",
)


def read_fronts(queue: JobQueue, terms: Terms, now: datetime, first: int) -> list[Known]:
    """The queue's dispatched jobs, then its first `first` waiting jobs in serving order."""
    dispatched = _considered(queue).filter(status__in=DISPATCHED).values_list(*_FIELDS)
    waiting = waiting_in_order(queue)[:first].values_list(*_FIELDS)
    shares, units, at = terms.names, terms.units, now.timestamp()
    running = [_running(row, shares, units, at) for row in dispatched]
    return running + [_waiting(row, shares, units) for row in waiting]


def waiting_in_order(queue: JobQueue):
    """The queue's waiting jobs in serving order, read through job_queue_waiting (slice it)."""
    # The priority bound is the index's condition: it lets this read use the index.
    waiting = _considered(queue).filter(
        status=JobStatus.RUNNABLE, scheduling_priority__gte=MIN_PRIORITY
    )
    return waiting.order_by(*WAITING_ORDER)


def _considered(queue: JobQueue):
    """The queue's jobs an estimate considers: in a share, and not a preempted job whose ranks
    still stop (as in the tick's snapshot)."""
    return Job.objects.filter(job_queue=queue, quota_share__isnull=False, preemption_stopping=False)


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
