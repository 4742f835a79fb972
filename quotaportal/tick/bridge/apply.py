"""A scheduler Plan -> database rows: apply_plan writes it back with conditional updates, so a
job that changed since the snapshot (terminated, finished) is skipped instead of corrupted."""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connection
from django.db.models import Count

from quotaportal.infra.bulk import update_objects, update_rows
from quotaportal.quotas.audit import event_row, insert_events
from quotaportal.quotas.models import (
    DISPATCHED,
    Event,
    EventKind,
    Job,
    JobAttempt,
    JobQueue,
    JobStatus,
    QuotaShare,
)
from quotaportal.tick import changes
from quotaportal.tick.bridge.snapshot import Loaded
from scheduler import Plan, PreemptionKind

RECENT_PREEMPTIONS_KEPT = 10
PREEMPTION_REASONS = {
    PreemptionKind.CROSS_SHARE: (
        "PREEMPTION_IN_PROGRESS: Cross-share preemption triggered to reclaim borrowed capacity"
    ),
    PreemptionKind.IN_SHARE: (
        "PREEMPTION_IN_PROGRESS: In-share preemption triggered for a higher priority job"
    ),
    PreemptionKind.CAPACITY: "PREEMPTION_IN_PROGRESS: Capacity reservation ended",
}
# A preempted job's reason once its attempt has stopped and it waits again (AWS documents no
# text for it): what happened, in words, and that it is back in line.
PREEMPTED_REASONS = {
    PreemptionKind.CROSS_SHARE.value: (
        "Preempted: a lender took back its capacity (cross-share); waiting to run again"
    ),
    PreemptionKind.IN_SHARE.value: (
        "Preempted by a higher-priority job of its share (in-share); waiting to run again"
    ),
    PreemptionKind.CAPACITY.value: (
        "Preempted: a capacity reservation ended; waiting to run again"
    ),
}
PREEMPTION_EVENTS = {
    PreemptionKind.CROSS_SHARE: EventKind.PREEMPTED_CROSS_SHARE,
    PreemptionKind.IN_SHARE: EventKind.PREEMPTED_IN_SHARE,
    PreemptionKind.CAPACITY: EventKind.PREEMPTED_CAPACITY,
}
RETRIES_EXHAUSTED = "Preemption retries exhausted"


def apply_plan(
    queue: JobQueue,
    loaded: Loaded,
    plan: Plan,
    now: datetime,
    *,
    stops_at_once: bool = True,
    reasons: list[tuple[str, str]] | None = None,
) -> tuple[list[str], int]:
    """Write a plan: start jobs, preempt victims, store pending reasons.

    `stops_at_once`: a preempted attempt has stopped as soon as it is preempted (SIMULATED),
    so its preemption completes now; otherwise the backend says when it has (a LOCAL job's
    ranks exit after their grace period).

    `reasons`: changed_reasons(loaded, plan), when worked out already.

    Returns the ids of the jobs started (in plan order) and how many jobs were preempted.
    """
    started = _start_jobs(queue, plan, now)
    preempted = _preempt_victims(queue, plan, now, stops_at_once)
    write_pending(loaded, plan, reasons)
    return started, preempted


START_REASONS = {
    False: "Dispatched within the quota share's limit",
    True: "Dispatched on borrowed idle capacity",
}
# A tick that starts a thousand jobs spends its time writing them: on PostgreSQL one statement
# locks and checks each row (a job terminated since the snapshot stays as it is), marks it
# SCHEDULED, and adds its attempt and its DISPATCHED event.
START_SQL = """
    WITH wanted AS (
        SELECT * FROM unnest(%(ids)s::uuid[], %(borrowing)s::bool[], %(details)s::jsonb[])
            AS v(id, borrowing, detail)
    ), started AS (
        UPDATE quotas_job AS j SET status = 'SCHEDULED', scheduled_at = %(now)s,
            pending_reason = '',
            status_reason = CASE WHEN w.borrowing THEN %(borrowed)s ELSE %(within)s END
        FROM wanted AS w
        WHERE j.id = w.id AND j.status = 'RUNNABLE'
        RETURNING j.id, j.quota_share_id, w.detail,
            (SELECT COUNT(*) FROM quotas_jobattempt AS a WHERE a.job_id = j.id) AS attempts
    ), attempts AS (
        INSERT INTO quotas_jobattempt (job_id, number, started_at, status_reason, preempted)
        SELECT id, attempts + 1, %(now)s, '', false FROM started
    ), events AS (
        INSERT INTO quotas_event (time, actor_name, kind, job_id, share_id, job_queue_id, detail)
        SELECT %(now)s, 'system', %(kind)s, id, quota_share_id, %(queue)s, detail FROM started
    )
    SELECT id::text FROM started
"""


def _dispatch_detail(dispatch) -> dict:
    return {
        "borrowing": dispatch.borrowing,
        # Who made room for it, so its timeline can name them.
        "preempted": [p.job_id for p in dispatch.preempted],
        "preemption_kind": dispatch.preempted[0].kind.value if dispatch.preempted else "",
    }


def _start_jobs(queue: JobQueue, plan: Plan, now: datetime) -> list[str]:
    """Start the plan's jobs that are still RUNNABLE; their ids, in plan order."""
    wanted = {d.job_id: d for d in plan.dispatches}
    if not wanted:
        return []
    if connection.vendor == "postgresql":
        ids = sorted(wanted)
        with connection.cursor() as cursor:
            cursor.execute(
                START_SQL,
                {
                    "ids": ids,
                    "borrowing": [wanted[i].borrowing for i in ids],
                    "details": [json.dumps(_dispatch_detail(wanted[i])) for i in ids],
                    "now": now,
                    "borrowed": START_REASONS[True],
                    "within": START_REASONS[False],
                    "kind": EventKind.DISPATCHED.value,
                    "queue": queue.pk,
                },
            )
            ready = {row[0] for row in cursor.fetchall()}
        if ready:
            changes.events_written()
    else:
        ready = _start_jobs_portably(queue, wanted, now)
    return [job_id for job_id in wanted if job_id in ready]


def _start_jobs_portably(queue: JobQueue, wanted: dict, now: datetime) -> set[str]:
    """The same through the ORM (SQLite, the embedded default)."""
    share_of_ready = {
        str(i): share_id
        for i, share_id in Job.objects.select_for_update()
        .filter(id__in=list(wanted), status=JobStatus.RUNNABLE)
        .values_list("id", "quota_share_id")
    }
    for borrowing, reason in START_REASONS.items():
        ids = [i for i in share_of_ready if wanted[i].borrowing is borrowing]
        Job.objects.filter(id__in=ids).update(
            status=JobStatus.SCHEDULED, scheduled_at=now, status_reason=reason, pending_reason=""
        )
    numbers = dict(
        JobAttempt.objects.filter(job_id__in=list(share_of_ready))
        .values_list("job_id")
        .annotate(n=Count("id"))
    )
    numbers = {str(k): v for k, v in numbers.items()}
    ready = sorted(share_of_ready)
    JobAttempt.objects.bulk_create(
        JobAttempt(job_id=i, number=numbers.get(i, 0) + 1, started_at=now) for i in ready
    )
    insert_events(
        [
            event_row(
                EventKind.DISPATCHED,
                job_id=i,
                queue_id=queue.pk,
                share_id=share_of_ready[i],
                when=now,
                **_dispatch_detail(wanted[i]),
            )
            for i in ready
        ]
    )
    return set(ready)


def _preempt_victims(queue: JobQueue, plan: Plan, now: datetime, stops_at_once: bool) -> int:
    """Victims go back to RUNNABLE (or FAILED once preemption retries are exhausted).

    Victims are preempted even if their preemptor was terminated meanwhile: later dispatches
    in the plan may rely on the capacity they free, and preempting never over-books.
    """
    preemptions = {p.job_id: p for p in plan.preemptions}
    if not preemptions:
        return 0
    # Only what _preempt reads: a job's row carries its whole submitted request as JSON,
    # which a reclaim of hundreds of jobs would decode for nothing.
    victims = list(
        Job.objects.select_for_update()
        .filter(id__in=list(preemptions), status__in=DISPATCHED)
        .only(*VICTIM_FIELDS)
    )
    events = []
    for job in victims:
        events += _preempt(job, preemptions[str(job.id)], queue, now, stops_at_once)
    # In bulk: a tick that reclaims hundreds of instances writes them in a few statements.
    _write_preempted(victims)
    for kind in {p.kind for p in preemptions.values()}:
        ids = [j.pk for j in victims if preemptions[str(j.pk)].kind == kind]
        JobAttempt.objects.filter(job_id__in=ids, stopped_at__isnull=True).update(
            stopped_at=now, preempted=True, status_reason=PREEMPTION_REASONS[kind]
        )
    insert_events(events)
    return len(victims)


VICTIM_FIELDS = [
    "quota_share_id",
    "status",
    "preempted_count",
    "recent_preemptions",
    "preemption_retries_before_termination",
    "scheduled_at",
]
PREEMPTED_FIELDS = [
    "preemption_stopping",
    "preempted_count",
    "recent_preemptions",
    "status",
    "status_reason",
    "stopped_at",
    "scheduled_at",
    "started_at",
]


def _write_preempted(victims: list[Job]) -> None:
    update_objects(victims, PREEMPTED_FIELDS)


def _preempt(job: Job, preemption, queue: JobQueue, now: datetime, stopped: bool) -> list[Event]:
    """Set the victim's fields (not saved) and return its events."""
    reason = PREEMPTION_REASONS[preemption.kind]
    job.preempted_count += 1
    recent = {
        "started_at": job.scheduled_at.isoformat() if job.scheduled_at else None,
        "stopped_at": now.isoformat(),
        "status_reason": reason,
        "kind": preemption.kind.value,
        "preempted_by": preemption.preemptor_id,
    }
    job.recent_preemptions = [*job.recent_preemptions, recent][-RECENT_PREEMPTIONS_KEPT:]
    retries = job.preemption_retries_before_termination
    exhausted = retries is not None and job.preempted_count > retries
    status_before = job.status
    job.status = JobStatus.FAILED if exhausted else JobStatus.RUNNABLE
    if exhausted:
        job.status_reason = RETRIES_EXHAUSTED
    else:  # in progress until its attempt stops (at once, or when the backend says so)
        job.status_reason = PREEMPTED_REASONS[preemption.kind.value] if stopped else reason
    job.stopped_at = now if exhausted else None
    job.scheduled_at = job.started_at = None  # written in bulk by the caller
    # Its ranks wind down first (LOCAL): left out of plans, shown RUNNING, until they stop.
    job.preemption_stopping = not stopped and not exhausted
    about_job = {"job_id": job.pk, "queue_id": queue.pk, "share_id": job.quota_share_id}
    events = [
        event_row(
            PREEMPTION_EVENTS[preemption.kind],
            **about_job,
            when=now,
            preempted_by=preemption.preemptor_id,
            reason=reason,
            status=status_before,  # what it was when the preemption started (AWS: RUNNING)
            exhausted=exhausted,
            # Its attempt stopped with the preemption: the preemption completed too (one
            # event for both, since a tick that reclaims hundreds of instances writes them).
            stopped=stopped,
        )
    ]
    if exhausted:
        events.append(event_row(EventKind.FAILED, **about_job, when=now, reason=RETRIES_EXHAUSTED))
    return events


def changed_reasons(loaded: Loaded, plan: Plan) -> list[tuple[str, str]]:
    """(job id, reason) of each waiting job whose reason the plan changes."""
    before = loaded.pending
    return [
        (job_id, p.reason) for job_id, p in plan.pending.items() if before.get(job_id) != p.reason
    ]


def write_pending(loaded: Loaded, plan: Plan, changed: list[tuple[str, str]] | None = None) -> int:
    """Store pending reasons, touching only the rows whose reason changed (`changed`:
    changed_reasons(loaded, plan), when worked out already)."""
    if changed is None:
        changed = changed_reasons(loaded, plan)
    if changed:
        ids, reasons = zip(*changed, strict=True)
        reasons = [str(reason) for reason in reasons]
        update_rows(
            Job, list(ids), {"pending_reason": reasons}, only_if=("status", [JobStatus.RUNNABLE])
        )
    _write_share_ranks(loaded, plan)
    return len(changed)


def _write_share_ranks(loaded: Loaded, plan: Plan) -> None:
    ranks = {name: index for index, name in enumerate(plan.share_ranking)}
    changed = [
        (share_id, ranks.get(name))
        for name, share_id in loaded.share_ids.items()
        if loaded.share_ranks.get(name) != ranks.get(name)
    ]
    if changed:
        ids, ranks_now = zip(*changed, strict=True)
        update_rows(QuotaShare, list(ids), {"queue_rank": list(ranks_now)})
