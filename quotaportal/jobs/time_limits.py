"""Time limits: an attempt that runs past attempt_duration_seconds fails (and may retry); a
job heading its share RUNNABLE past a queue's jobStateTimeLimitActions is terminated."""

from __future__ import annotations

from datetime import timedelta

from quotaportal.jobs.transitions import end_attempt
from quotaportal.jobs.user_actions import terminate_job
from quotaportal.quotas.models import (
    ENVIRONMENT_TOO_SMALL,
    INSUFFICIENT_CAPACITY,
    QUOTA_LIMIT_EXCEEDED,
    Job,
    JobStatus,
    PendingReason,
)
from quotaportal.quotas.selectors import heads_waiting_since
from quotaportal.tick.changes import agents_must_hear

ATTEMPT_TIMEOUT = "Attempt duration exceeded"


def enforce_attempt_timeouts(queue_id: int, now) -> None:
    """attempt_duration_seconds counts from RUNNING; past it the attempt fails (and may retry)."""
    running = Job.objects.filter(
        job_queue_id=queue_id,
        status=JobStatus.RUNNING,
        attempt_duration_seconds__isnull=False,
        started_at__isnull=False,
    ).only("id", "started_at", "attempt_duration_seconds", "job_queue_id")
    timed_out = [
        job
        for job in running
        if job.started_at + timedelta(seconds=job.attempt_duration_seconds) <= now
    ]
    for job in timed_out:
        end_attempt(job, succeeded=False, status_reason=ATTEMPT_TIMEOUT, now=now)
    if timed_out:
        agents_must_hear(queue_id)  # their ranks must stop


TIME_LIMIT_REASON = "Terminated by JobStateTimeLimit action due to reason: {reason}"


def enforce_runnable_time_limits(queue, now) -> int:
    """AWS's jobStateTimeLimitActions: a job that heads its share RUNNABLE for longer than an
    action's max_time_seconds (since it was submitted or last requeued), blocked for that
    action's reason, is terminated, so the jobs behind it move up. Per reason the shortest
    limit applies. Returns how many were terminated."""

    limits: dict[str, int] = {}
    for action in queue.job_state_time_limit_actions or []:
        reason, seconds = action["reason"], action["max_time_seconds"]
        limits[reason] = min(seconds, limits.get(reason, seconds))
    if not limits:
        return 0
    cutoff = now - timedelta(seconds=min(limits.values()))
    sizes = environment_sizes(queue)
    terminated = 0
    for job in heads_waiting_since(queue, cutoff):
        reason = blocked_for(job, sizes)
        if reason in limits and job.waiting_since <= now - timedelta(seconds=limits[reason]):
            terminate_job(None, job, TIME_LIMIT_REASON.format(reason=reason), now=now)
            terminated += 1
    return terminated


# The pending reasons each of AWS's time-limit reasons covers.
BLOCKED_BY = {
    INSUFFICIENT_CAPACITY: {PendingReason.WAITING_FOR_CAPACITY, PendingReason.NOTHING_TO_BORROW},
    QUOTA_LIMIT_EXCEEDED: {
        PendingReason.SHARE_AT_LIMIT,
        PendingReason.BORROW_LIMIT_REACHED,
        PendingReason.EXCEEDS_SHARE_CEILING,
        PendingReason.NO_CAPACITY_LIMIT_FOR_UNIT,
    },
}


def blocked_for(job: Job, sizes: dict[int, int]) -> str | None:
    """The time-limit reason a RUNNABLE head is blocked for: larger than its environment
    (SERVICE_ENVIRONMENT_MAX_RESOURCE), held by its share's quota configuration, or waiting
    for capacity; None when it is blocked for none of them."""
    if job.quantity > sizes.get(job.capacity_unit_id, 0):
        return ENVIRONMENT_TOO_SMALL
    for reason, pending in BLOCKED_BY.items():
        if job.pending_reason in pending:
            return reason
    return None


def environment_sizes(queue) -> dict[int, int]:
    """The queue's environment's max_capacity per capacity unit id."""
    return dict(
        queue.service_environment.capacity_limits.values_list("capacity_unit_id", "max_capacity")
    )
