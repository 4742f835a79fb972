"""A job on its way to run: dispatched by a plan, handed to its hosts, running; or back in
line when no host could hold it."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Case, DateTimeField, Value, When
from django.utils import timezone

from quotaportal.infra.bulk import insert_new, per_row, update_returning
from quotaportal.quotas.audit import event_row, insert_events
from quotaportal.quotas.models import (
    EventKind,
    Job,
    JobAttempt,
    JobStatus,
)

START_REASONS = {
    False: "Dispatched within the quota share's limit",
    True: "Dispatched on borrowed idle capacity",
}


def dispatch(queue_id: int, dispatches, now: datetime) -> list[str]:
    """Start a plan's dispatches whose jobs are still RUNNABLE (one terminated since the
    plan's snapshot stays as it is): SCHEDULED, a new attempt and a DISPATCHED event each.
    Their ids, in plan order."""
    wanted = {d.job_id: d for d in dispatches}
    if not wanted:
        return []
    borrowing = [i for i, d in wanted.items() if d.borrowing]
    started = update_returning(
        Job.objects.filter(id__in=list(wanted), status=JobStatus.RUNNABLE),
        ["id", "quota_share_id"],
        extra=ATTEMPTS_SO_FAR,
        status=JobStatus.SCHEDULED,
        scheduled_at=now,
        pending_reason="",
        status_reason=_start_reason(borrowing, len(wanted)),
    )
    if not started:
        return []
    ready = {str(pk): (share_id, attempts) for pk, share_id, attempts in started}
    insert_new(
        [
            JobAttempt(job_id=i, number=attempts + 1, started_at=now)
            for i, (_, attempts) in ready.items()
        ]
    )
    insert_events(
        [
            event_row(
                EventKind.DISPATCHED,
                job_id=i,
                queue_id=queue_id,
                share_id=share_id,
                when=now,
                **_dispatch_detail(wanted[i]),
            )
            for i, (share_id, _) in ready.items()
        ]
    )
    return [job_id for job_id in wanted if job_id in ready]


# How many attempts a job has had, in the row its dispatch updates: its next one's number
# less one (an attempt that never ran was deleted with return_unplaced: no gaps).
ATTEMPTS_SO_FAR = (
    f"(SELECT COUNT(*) FROM {JobAttempt._meta.db_table} AS a"
    f" WHERE a.job_id = {Job._meta.db_table}.id)"
)


def _start_reason(borrowing: list[str], starting: int):
    """The status reason of each starting job: borrowed or within its share's limit."""
    if len(borrowing) in (0, starting):
        return START_REASONS[bool(borrowing)]
    return Case(
        When(id__in=borrowing, then=Value(START_REASONS[True])),
        default=Value(START_REASONS[False]),
    )


def _dispatch_detail(dispatch) -> dict:
    return {
        "borrowing": dispatch.borrowing,
        # Who made room for it, so its timeline can name them.
        "preempted": [p.job_id for p in dispatch.preempted],
        "preemption_kind": dispatch.preempted[0].kind.value if dispatch.preempted else "",
    }


def mark_started(job: Job, now=None) -> bool:
    """The backend reports the job's process running (LOCAL agents, AWS sync)."""
    return bool(mark_started_in_bulk({job.pk: now or timezone.now()}))


NOT_YET_RUNNING = (JobStatus.SCHEDULED, JobStatus.STARTING)


def mark_starting(job_ids: list) -> int:
    """These SCHEDULED jobs were handed to the hosts that launch them (a LOCAL agent's answer
    lists their ranks): STARTING until a host reports them running. Each with its event."""
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        moved = update_returning(
            Job.objects.filter(pk__in=job_ids, status=JobStatus.SCHEDULED),
            ["id", "job_queue_id", "quota_share_id"],
            status=JobStatus.STARTING,
        )
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


def mark_started_in_bulk(started: dict) -> int:
    """mark_started for many jobs at once (an agent's batch of reports, a SIMULATED tick):
    job id -> when it started. Each job that was still on its way gets its STARTED event."""
    if not started:
        return 0
    when = {str(pk): at for pk, at in started.items()}
    with transaction.atomic(savepoint=False):
        rows = update_returning(
            Job.objects.filter(pk__in=list(when), status__in=NOT_YET_RUNNING),
            ["id", "job_queue_id", "quota_share_id"],
            status=JobStatus.RUNNING,
            started_at=per_row(when, output_field=DateTimeField()),
        )
        insert_events(
            [
                event_row(
                    EventKind.STARTED,
                    job_id=pk,
                    queue_id=queue_id,
                    share_id=share_id,
                    when=when[str(pk)],
                )
                for pk, queue_id, share_id in rows
            ]
        )
    return len(rows)
