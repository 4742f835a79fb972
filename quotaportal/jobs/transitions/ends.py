"""A job's attempt ends: the job succeeds, fails, or waits to be retried."""

from __future__ import annotations

from django.db import transaction
from django.db.models import DateTimeField, F
from django.utils import timezone

from quotaportal.infra.bulk import per_row, update_returning
from quotaportal.jobs.retries import should_retry
from quotaportal.quotas.audit import event_row, insert_events, record
from quotaportal.quotas.models import (
    DISPATCHED,
    EventKind,
    Job,
    JobAttempt,
    JobStatus,
)
from quotaportal.tick.changes import queue_changed


def end_attempt(
    job: Job,
    *,
    succeeded: bool,
    status_reason: str,
    exit_code: int | None = None,
    now=None,
    actor=None,
) -> Job | None:
    """Close the running attempt; retry or finish the job. None when the job was not dispatched.

    Whether the job's agents must hear at once (its other ranks must stop) is the caller's to
    say (changes.agents_must_hear): it knows where the ranks run."""
    now = now or timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job.pk, status__in=DISPATCHED).first()
        if job is None:
            return None
        job.attempts.filter(stopped_at__isnull=True).update(
            stopped_at=now, status_reason=status_reason, exit_code=exit_code
        )
        job.attempt_count = F("attempt_count") + 1
        job.save(update_fields=["attempt_count"])
        job.refresh_from_db(fields=["attempt_count"])
        retry = not succeeded and should_retry(
            job.evaluate_on_exit, status_reason, job.attempt_count, job.retry_attempts
        )
        if succeeded:
            job.status, kind = JobStatus.SUCCEEDED, EventKind.SUCCEEDED
        elif retry:
            job.status, kind = JobStatus.RUNNABLE, EventKind.RETRIED
        else:
            job.status, kind = JobStatus.FAILED, EventKind.FAILED
        job.status_reason = status_reason
        job.scheduled_at = None if retry else job.scheduled_at
        job.stopped_at = None if retry else now
        job.save(update_fields=["status", "status_reason", "scheduled_at", "stopped_at"])
        record(
            actor,
            kind,
            job=job,
            share=job.quota_share,
            when=now,
            reason=status_reason,
            exit_code=exit_code,
            attempt=job.attempt_count,
        )
    queue_changed(job.job_queue_id)
    return job


def finish_job(job: Job, status: str, now=None, actor=None) -> Job | None:
    """A dispatched job ends with the given final status (simulations, scenarios, AWS sync)."""
    succeeded = status == JobStatus.SUCCEEDED
    reason = "Job completed" if succeeded else "Job failed"
    return end_attempt(job, succeeded=succeeded, status_reason=reason, now=now, actor=actor)


def succeed_in_bulk(
    job_ids,
    status_reason: str,
    now,
    *,
    ended_at: dict | None = None,
) -> int:
    """end_attempt(succeeded=True) for many jobs at once: a busy simulated queue ends dozens
    of jobs per tick, an agent's batch of reports several. The number of jobs ended (those
    still dispatched).

    `ended_at`: job id -> when it ended, for jobs that did not end `now` (an agent saw it).
    """
    given = {str(pk): (ended_at or {}).get(pk, now) for pk in job_ids}
    # No savepoint inside a caller's transaction (a batch of reports, a tick): a failure
    # here fails the caller anyway, and the two statements of a savepoint are saved.
    with transaction.atomic(savepoint=False):
        rows = update_returning(
            Job.objects.filter(pk__in=list(given), status__in=DISPATCHED),
            ["id", "job_queue_id", "quota_share_id", "attempt_count"],
            status=JobStatus.SUCCEEDED,
            status_reason=status_reason,
            stopped_at=per_row(given, output_field=DateTimeField()),
            attempt_count=F("attempt_count") + 1,
        )
        if not rows:
            return 0
        when = {pk: given[str(pk)] for pk, _, _, _ in rows}
        JobAttempt.objects.filter(job_id__in=list(when), stopped_at__isnull=True).update(
            stopped_at=per_row(when, "job_id", DateTimeField()),
            status_reason=status_reason,
            exit_code=0,
        )
        insert_events(
            [
                event_row(
                    EventKind.SUCCEEDED,
                    job_id=pk,
                    queue_id=queue_id,
                    share_id=share_id,
                    when=when[pk],
                    reason=status_reason,
                    exit_code=0,
                    attempt=count,  # as the update left it
                )
                for pk, queue_id, share_id, count in rows
            ]
        )
    for queue_id in sorted({queue_id for _, queue_id, _, _ in rows}):
        queue_changed(queue_id)
    return len(rows)
