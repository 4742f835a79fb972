"""A queue's history as a simulator workload, and its configuration as the simulator sees it
(read only: the what-if page and `export_workload` start from these)."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta

from django.utils import timezone

from quotaportal.quotas.models import (
    Event,
    EventKind,
    Job,
    JobQueue,
)
from quotaportal.tick import bridge
from scheduler.simulate import QueueConfig, QueueWorkload, WorkJob, Workload

DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """'7d', '12h', '30m' or '90s' as a timedelta; ValueError says what is accepted."""
    match = DURATION.match(text or "")
    if not match or int(match[1]) == 0:
        raise ValueError(
            f"{text!r} is not a duration: write a whole number and s, m, h or d, e.g. 7d"
        )
    return timedelta(seconds=int(match[1]) * UNITS[match[2]])


def queue_config(queue: JobQueue) -> QueueConfig:
    """The queue as the scheduler sees it now: capacity, shares and ordering."""
    snapshot = bridge.load_snapshot(queue).snapshot
    return QueueConfig(queue.name, dict(snapshot.capacity), snapshot.shares, snapshot.ordering)


def queue_history(queue: JobQueue, since: timedelta, now: datetime | None = None) -> Workload:
    """The jobs submitted to the queue in the last `since`, as a workload on today's
    configuration. A job runs as long as its last attempt did (a running one: so far; one
    that never ran: its simulated duration, else it is left out)."""
    now = now or timezone.now()
    start = now - since
    jobs = list(
        Job.objects.filter(job_queue=queue, created_at__gte=start, quota_share__isnull=False)
        .select_related("capacity_unit")
        .order_by("created_at", "id")
    )
    changes = _priority_changes([job.pk for job in jobs])
    first = jobs[0].created_at if jobs else start
    work, left_out, still_running = [], 0, 0
    for job in jobs:
        duration = _run_time(job, now)
        if duration is None:
            left_out += 1
            continue
        if job.started_at is not None and job.stopped_at is None:
            still_running += 1
        history = changes.get(job.pk, [])
        priority = history[0][1] if history else job.scheduling_priority
        work.append(
            WorkJob(
                str(job.pk),
                job.share_name,
                job.capacity_unit.name,
                job.quantity,
                priority,
                (job.created_at - first).total_seconds(),
                float(duration),
                tuple(((at - first).total_seconds(), to) for at, _, to in history),
            )
        )
    notes = (
        f"queue {queue.name}: {counted(len(jobs), 'job')} submitted since "
        f"{start:%Y-%m-%d %H:%M} UTC, replayed on today's configuration",
        _durations_note(len(work), still_running, left_out),
    )
    return Workload(
        f"{queue.name}-history", (QueueWorkload(queue_config(queue), tuple(work)),), notes
    )


def counted(n: int, noun: str) -> str:
    """ "1 job", "6 jobs"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _durations_note(replayed: int, still_running: int, left_out: int) -> str:
    note = f"{counted(replayed, 'job')} replayed, each as long as its last run"
    if still_running:
        note += f" ({still_running:,} still running: as long as so far)"
    if left_out:
        was = "was" if left_out == 1 else "were"
        note += f"; {counted(left_out, 'job')} never ran and {was} left out"
    return note


def _run_time(job: Job, now: datetime) -> float | None:
    """Seconds the job's last run took (so far, while it runs): from RUNNING to its end."""
    if job.started_at is not None:
        return max(0.0, ((job.stopped_at or now) - job.started_at).total_seconds())
    return job.simulated_duration_seconds


def _priority_changes(job_ids: list) -> dict:
    """Job id -> [(time, from, to)] of its priority changes, oldest first."""
    result = defaultdict(list)
    for job_id, at, detail in (
        Event.objects.filter(job_id__in=job_ids, kind=EventKind.PRIORITY_CHANGED)
        .order_by("time", "id")
        .values_list("job_id", "time", "detail")
    ):
        result[job_id].append((at, detail.get("from"), detail.get("to")))
    return result


# -- replaying a workload through the services -----------------------------------------------
