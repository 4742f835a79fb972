"""A job preempted: its attempt stops, it waits again (or fails once its preemption retries
are exhausted), and is back in line once its ranks have stopped."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from quotaportal.infra.bulk import update_objects
from quotaportal.quotas.audit import event_row, insert_events, preemption_completed
from quotaportal.quotas.models import (
    DISPATCHED,
    Event,
    EventKind,
    Job,
    JobAttempt,
    JobStatus,
)
from quotaportal.tick.changes import queue_changed
from scheduler import PreemptionKind

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


def preempt(queue_id: int, preemptions, now: datetime, stops_at_once: bool) -> int:
    """A plan's victims go back to RUNNABLE (or FAILED once preemption retries are
    exhausted); how many. `stops_at_once`: see apply_plan.

    Victims are preempted even if their preemptor was terminated meanwhile: later dispatches
    in the plan may rely on the capacity they free, and preempting never over-books.
    """
    preemptions = {p.job_id: p for p in preemptions}
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
        events += _preempt(job, preemptions[str(job.id)], queue_id, now, stops_at_once)
    # In bulk: a tick that reclaims hundreds of instances writes them in a few statements.
    update_objects(victims, PREEMPTED_FIELDS)
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


def _preempt(job: Job, preemption, queue_id: int, now: datetime, stopped: bool) -> list[Event]:
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
    about_job = {"job_id": job.pk, "queue_id": queue_id, "share_id": job.quota_share_id}
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
