"""How attempts start and end: dispatched, starting, running, success, failure with retries,
and the end of a preemption (the SIMULATED backend and the time limits use these).

Each transition is a conditional UPDATE on the job's current status, so a stale or
replayed report (an agent retrying, a tick racing a termination) changes nothing.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Case, DateTimeField, F, Value, When
from django.utils import timezone

from quotaportal.infra.bulk import update_rows
from quotaportal.jobs.retries import should_retry
from quotaportal.quotas.audit import event_row, insert_events, preemption_completed, record
from quotaportal.quotas.models import (
    DISPATCHED,
    Event,
    EventKind,
    Job,
    JobAttempt,
    JobStatus,
)
from quotaportal.tick.bridge import PREEMPTED_REASONS
from quotaportal.tick.changes import events_written, queue_changed


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
    """end_attempt(succeeded=True) for many jobs in one statement (PostgreSQL; a handful on
    SQLite): a busy simulated queue ends dozens of jobs per tick, an agent's batch of reports
    several. The number of jobs ended (those still dispatched).

    `ended_at`: job id -> when it ended, for jobs that did not end `now` (an agent saw it).
    """
    when = {str(pk): (ended_at or {}).get(pk, now) for pk in job_ids}
    if connection.vendor == "postgresql":
        queue_ids = _succeed_at_once(when, status_reason)
    else:
        queue_ids = _succeed_portably(when, status_reason)
    if queue_ids:
        events_written()
    for queue_id in sorted(set(queue_ids)):
        queue_changed(queue_id)
    return len(queue_ids)


# succeed_in_bulk's writes as one statement: the jobs still dispatched end, their open
# attempts stop, and each gets its SUCCEEDED event. Every exit an agent reports runs it.
SUCCEED_SQL = f"""
    WITH ending AS (
        SELECT * FROM unnest(%(ids)s::uuid[], %(ended)s::timestamptz[]) AS v(id, ended_at)
    ), ended AS (
        UPDATE quotas_job AS j SET status = 'SUCCEEDED', status_reason = %(reason)s,
            stopped_at = e.ended_at, attempt_count = j.attempt_count + 1
        FROM ending AS e
        WHERE j.id = e.id AND j.status IN ({", ".join(repr(str(s)) for s in DISPATCHED)})
        RETURNING j.id, j.job_queue_id, j.quota_share_id, j.attempt_count, e.ended_at
    ), attempts AS (
        UPDATE quotas_jobattempt AS a SET stopped_at = e.ended_at,
            status_reason = %(reason)s, exit_code = 0
        FROM ended AS e
        WHERE a.job_id = e.id AND a.stopped_at IS NULL
    ), events AS (
        INSERT INTO quotas_event (time, actor_name, kind, job_id, share_id, job_queue_id, detail)
        SELECT ended_at, 'system', '{EventKind.SUCCEEDED}', id, quota_share_id, job_queue_id,
            jsonb_build_object(
                'reason', %(reason)s::text, 'exit_code', 0, 'attempt', attempt_count
            )
        FROM ended
    )
    SELECT job_queue_id FROM ended
"""


def _succeed_at_once(when: dict, status_reason: str) -> list[int]:
    """The queue of each job that ended (one entry per job)."""
    ids = list(when)
    with connection.cursor() as cursor:
        cursor.execute(
            SUCCEED_SQL,
            {"ids": ids, "ended": [when[i] for i in ids], "reason": status_reason},
        )
        return [queue_id for (queue_id,) in cursor.fetchall()]


def _succeed_portably(when: dict, status_reason: str) -> list[int]:
    """The same through the ORM (SQLite, the embedded default)."""
    # No savepoint inside a caller's transaction (a batch of reports, a tick): a failure
    # here fails the caller anyway, and the two statements of a savepoint are saved.
    with transaction.atomic(savepoint=False):
        rows = list(
            Job.objects.select_for_update()
            .filter(pk__in=list(when), status__in=DISPATCHED)
            .values_list("id", "job_queue_id", "quota_share_id", "attempt_count")
        )
        if not rows:
            return []
        when = {pk: when[str(pk)] for pk, _, _, _ in rows}
        JobAttempt.objects.filter(job_id__in=list(when), stopped_at__isnull=True).update(
            stopped_at=_per_row(when, "job_id"), status_reason=status_reason, exit_code=0
        )
        Job.objects.filter(pk__in=list(when)).update(
            status=JobStatus.SUCCEEDED,
            status_reason=status_reason,
            stopped_at=_per_row(when),
            attempt_count=F("attempt_count") + 1,
        )
        Event.objects.bulk_create(
            event_row(
                EventKind.SUCCEEDED,
                job_id=pk,
                queue_id=queue_id,
                share_id=share_id,
                when=when[pk],
                reason=status_reason,
                exit_code=0,
                attempt=count + 1,
            )
            for pk, queue_id, share_id, count in rows
        )
    return [queue_id for _, queue_id, _, _ in rows]


def mark_started(job: Job, now=None) -> bool:
    """The backend reports the job's process running (LOCAL agents, AWS sync)."""
    return bool(mark_started_in_bulk({job.pk: now or timezone.now()}))


NOT_YET_RUNNING = (JobStatus.SCHEDULED, JobStatus.STARTING)


# mark_starting's writes as one statement (every answer that hands a host its next job runs
# it): the jobs still SCHEDULED become STARTING, each with its STARTING event.
STARTING_SQL = f"""
    WITH starting AS (
        UPDATE quotas_job AS j SET status = 'STARTING'
        WHERE j.id = ANY(%(ids)s::uuid[]) AND j.status = 'SCHEDULED'
        RETURNING j.id, j.job_queue_id, j.quota_share_id
    ), events AS (
        INSERT INTO quotas_event (time, actor_name, kind, job_id, share_id, job_queue_id, detail)
        SELECT %(now)s, 'system', '{EventKind.STARTING}', id, quota_share_id, job_queue_id,
            '{{}}'::jsonb
        FROM starting
    )
    SELECT COUNT(*) FROM starting
"""


def mark_starting(job_ids: list) -> int:
    """These SCHEDULED jobs were handed to the hosts that launch them (a LOCAL agent's answer
    lists their ranks): STARTING until a host reports them running. Each with its event."""
    now = timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(STARTING_SQL, {"ids": [str(pk) for pk in job_ids], "now": now})
            count = cursor.fetchone()[0]
        if count:
            events_written()
        return count
    with transaction.atomic():
        moved = list(
            Job.objects.select_for_update()
            .filter(pk__in=job_ids, status=JobStatus.SCHEDULED)
            .values_list("id", "job_queue_id", "quota_share_id")
        )
        Job.objects.filter(pk__in=[row[0] for row in moved]).update(status=JobStatus.STARTING)
        insert_events(
            [
                event_row(EventKind.STARTING, job_id=pk, queue_id=queue, share_id=share, when=now)
                for pk, queue, share in moved
            ]
        )
    return len(moved)


def return_unplaced(job_ids: list[str], reason: str = "No host could hold it; waiting") -> int:
    """Jobs a plan started that their backend could not place (capacity raced away, a
    cluster that would not run them yet) wait again: RUNNABLE, their attempt undone (it never
    ran, so it uses no attempt and counts no usage). How many went back."""
    moving = list(
        Job.objects.select_for_update()
        .filter(id__in=job_ids, status__in=NOT_YET_RUNNING)
        .values_list("id", flat=True)
    )
    if not moving:
        return 0  # a job that ran meanwhile keeps its attempt
    Job.objects.filter(id__in=moving).update(
        status=JobStatus.RUNNABLE, scheduled_at=None, status_reason=reason, pending_reason=""
    )
    JobAttempt.objects.filter(job_id__in=moving, stopped_at__isnull=True).delete()
    return len(moving)


@transaction.atomic
def preemptions_completed(stopped: dict) -> None:
    """The preempted attempts of these jobs have stopped (job id -> when; a LOCAL job's last
    rank exited): their preemptions are over. A job that waited for that to be planned again
    is RUNNABLE now, to the planner too: its queue is re-planned. The rows are read locked,
    so two reports of the same last exit release a job once."""
    if not stopped:
        return
    jobs = list(
        Job.objects.select_for_update()
        .filter(pk__in=list(stopped))
        .only(
            "job_queue_id",
            "quota_share_id",
            "preempted_count",
            "status",
            "preemption_stopping",
            "recent_preemptions",
        )
    )
    released = [job.pk for job in jobs if job.preemption_stopping]
    if released:
        Job.objects.filter(pk__in=released).update(preemption_stopping=False)
    # A job terminated while its ranks stopped is FAILED: released, but not back in line.
    requeued = {
        job.pk for job in jobs if job.preemption_stopping and job.status == JobStatus.RUNNABLE
    }
    _say_back_in_line([job for job in jobs if job.pk in requeued])
    insert_events(
        [
            preemption_completed(job, job.job_queue_id, stopped[job.pk], job.pk in requeued)
            for job in jobs
        ]
    )
    for queue_id in {job.job_queue_id for job in jobs if job.pk in requeued}:
        queue_changed(queue_id)


def _say_back_in_line(jobs: list[Job]) -> None:
    """Their preemption is over and they wait again: their reason says so (it said
    PREEMPTION_IN_PROGRESS while their attempt stopped)."""
    by_kind: dict[str, list] = {}
    for job in jobs:
        kind = (job.recent_preemptions or [{}])[-1].get("kind", "cross_share")
        by_kind.setdefault(kind, []).append(job.pk)
    for kind, ids in by_kind.items():
        reason = PREEMPTED_REASONS.get(kind, PREEMPTED_REASONS["cross_share"])
        Job.objects.filter(pk__in=ids, status=JobStatus.RUNNABLE).update(status_reason=reason)


# mark_started_in_bulk's writes as one statement: the jobs still on their way run, each with
# its STARTED event. Every start an agent reports runs it.
START_SQL = f"""
    WITH starting AS (
        SELECT * FROM unnest(%(ids)s::uuid[], %(at)s::timestamptz[]) AS v(id, started_at)
    ), started AS (
        UPDATE quotas_job AS j SET status = 'RUNNING', started_at = s.started_at
        FROM starting AS s
        WHERE j.id = s.id AND j.status IN ('SCHEDULED', 'STARTING')
        RETURNING j.id, j.job_queue_id, j.quota_share_id, s.started_at
    ), events AS (
        INSERT INTO quotas_event (time, actor_name, kind, job_id, share_id, job_queue_id, detail)
        SELECT started_at, 'system', '{EventKind.STARTED}', id, quota_share_id, job_queue_id,
            '{{}}'::jsonb
        FROM started
    )
    SELECT COUNT(*) FROM started
"""


def mark_started_in_bulk(started: dict) -> int:
    """mark_started for many jobs at once (an agent's batch of reports, a SIMULATED tick):
    job id -> when it started. Each job that was still on its way gets its STARTED event."""
    if not started:
        return 0
    when = {str(pk): at for pk, at in started.items()}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(START_SQL, {"ids": list(when), "at": list(when.values())})
            count = cursor.fetchone()[0]
        if count:
            events_written()
        return count
    rows = list(
        Job.objects.select_for_update()
        .filter(pk__in=list(when), status__in=NOT_YET_RUNNING)
        .values_list("id", "job_queue_id", "quota_share_id")
    )
    if not rows:
        return 0
    moments = [when[str(pk)] for pk, _, _ in rows]
    update_rows(
        Job,
        [pk for pk, _, _ in rows],
        {"status": [JobStatus.RUNNING] * len(rows), "started_at": moments},
    )
    insert_events(
        [
            event_row(EventKind.STARTED, job_id=pk, queue_id=queue_id, share_id=share_id, when=at)
            for (pk, queue_id, share_id), at in zip(rows, moments, strict=True)
        ]
    )
    return len(rows)


def _per_row(values: dict, key: str = "pk"):
    """One UPDATE's value per row: a CASE over the rows' `key`."""
    if len(set(values.values())) == 1:
        return next(iter(values.values()))
    return Case(
        *(When(**{key: pk}, then=Value(value)) for pk, value in values.items()),
        output_field=DateTimeField(),
    )
