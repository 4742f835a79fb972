"""Jobs whose scheduler is remote (AWS Batch): writing back what it reports, adopting jobs it
holds that the portal did not submit, and ending a job it refused.

The backend packages read the remote API; these functions own the writes, so the job rows,
attempts and audit log follow one path whatever the backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from quotaportal.jobs.transitions import RECENT_PREEMPTIONS_KEPT
from quotaportal.quotas.audit import record
from quotaportal.quotas.models import (
    DISPATCHED,
    FINAL,
    EventKind,
    Job,
    JobAttempt,
    JobQueue,
    JobStatus,
    QuotaShare,
)
from quotaportal.tick.changes import queue_changed
from scheduler.validation import MAX_RETRY_ATTEMPTS, MIN_RETRY_ATTEMPTS

REMOTE = "AWS Batch"  # how the audit log names who decided


@dataclass
class RemoteAttempt:
    started_at: datetime | None
    stopped_at: datetime | None
    status_reason: str = ""


@dataclass
class RemoteState:
    """What the remote scheduler says of one job, in the portal's terms."""

    status: str
    status_reason: str = ""
    scheduling_priority: int | None = None
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    attempts: list[RemoteAttempt] = field(default_factory=list)
    preempted_count: int = 0
    recent_preemptions: list[dict] = field(default_factory=list)  # as Job.recent_preemptions
    is_terminated: bool = False


def preemption_kind(reason: str) -> str:
    text = (reason or "").lower()
    if "in-share" in text or "in share" in text:
        return EventKind.PREEMPTED_IN_SHARE
    if "capacity" in text and "reservation" in text:
        return EventKind.PREEMPTED_CAPACITY
    return EventKind.PREEMPTED_CROSS_SHARE


@transaction.atomic
def record_remote_state(job: Job, state: RemoteState, now: datetime | None = None) -> list[str]:
    """Write what the remote scheduler reports onto the job; the event kinds recorded.

    A job ended here first (terminated by its owner) stays as it is: the remote side is told
    to stop it and its own end is not news. Otherwise the remote side is the truth."""
    now = now or timezone.now()
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.status in FINAL:
        if job.is_terminated and state.status in FINAL:
            _reconcile_end(job, state)
        return []
    events = _transitions(job, state)
    reported = _reported_fields(state)
    reported["is_terminated"] = job.is_terminated or state.is_terminated
    if state.status != JobStatus.RUNNABLE:
        reported["pending_reason"] = ""
    for name, value in reported.items():
        setattr(job, name, value)
    fields = list(reported)
    if state.scheduling_priority is not None and state.scheduling_priority != (
        job.scheduling_priority
    ):
        events.append((EventKind.PRIORITY_CHANGED, {"from": job.scheduling_priority}))
        job.scheduling_priority = state.scheduling_priority
        fields.append("scheduling_priority")
    job.save(update_fields=fields)
    _write_attempts(job, state.attempts)
    for kind, detail in events:
        record(None, kind, job=job, share=job.quota_share, when=now, by=REMOTE, **detail)
    if events:
        queue_changed(job.job_queue_id)
    return [kind for kind, _ in events]


def _reconcile_end(job: Job, state: RemoteState) -> None:
    """A job terminated here ran on in the remote scheduler until it was told: its stop (and
    its attempts') become the remote side's, so its usage counts what really ran. Its end is
    no news: no event."""
    stopped_at = state.stopped_at or job.stopped_at
    if stopped_at != job.stopped_at:
        Job.objects.filter(pk=job.pk).update(stopped_at=stopped_at)
        job.stopped_at = stopped_at
    _write_attempts(job, state.attempts)


def _reported_fields(state: RemoteState) -> dict:
    """The job's fields as the remote scheduler reports them."""
    return {
        "status": state.status,
        "status_reason": state.status_reason,
        "scheduled_at": state.scheduled_at,
        "started_at": state.started_at,
        "stopped_at": state.stopped_at if state.status in FINAL else None,
        "preempted_count": state.preempted_count,
        "recent_preemptions": state.recent_preemptions[-RECENT_PREEMPTIONS_KEPT:],
        "is_terminated": state.is_terminated,
        "attempt_count": len(state.attempts),
    }


def _transitions(job: Job, state: RemoteState) -> list[tuple[str, dict]]:
    """The audit events that lead from the job as stored to the job as reported."""
    events = []
    preempted = max(0, state.preempted_count - job.preempted_count)
    for preemption in state.recent_preemptions[-preempted:] if preempted else []:
        reason = preemption.get("status_reason", "")
        # Seen after the fact: the preempted attempt has stopped by now.
        detail = {"reason": reason, "status": job.status, "stopped": True}
        events.append((preemption_kind(reason), detail))
    if state.status in DISPATCHED and (job.status not in DISPATCHED or preempted):
        events.append((EventKind.DISPATCHED, {"status": state.status}))
    if state.status == JobStatus.RUNNING and (job.status != JobStatus.RUNNING or preempted):
        events.append((EventKind.STARTED, {}))
    # Back to RUNNABLE from a run without a preemption: that attempt failed and is retried.
    if state.status == JobStatus.RUNNABLE and job.status in DISPATCHED and not preempted:
        events.append((EventKind.RETRIED, {"reason": state.status_reason}))
    if state.status == JobStatus.SUCCEEDED:
        events.append((EventKind.SUCCEEDED, {"reason": state.status_reason}))
    elif state.status == JobStatus.FAILED:
        events.append((EventKind.FAILED, {"reason": state.status_reason}))
    return events


def _write_attempts(job: Job, attempts: list[RemoteAttempt]) -> None:
    """Attempts numbered as the remote side lists them, oldest first."""
    have = {a.number: a for a in job.attempts.all()}
    for number, remote in enumerate(attempts, start=1):
        values = {
            "started_at": remote.started_at or job.scheduled_at or timezone.now(),
            "stopped_at": remote.stopped_at,
            "status_reason": remote.status_reason or "",
            "preempted": "preempt" in (remote.status_reason or "").lower(),
        }
        current = have.get(number)
        if current is None:
            JobAttempt.objects.create(job=job, number=number, **values)
        elif any(getattr(current, k) != v for k, v in values.items()):
            JobAttempt.objects.filter(pk=current.pk).update(**values)


@transaction.atomic
def adopt_remote_job(
    queue: JobQueue,
    share: QuotaShare,
    *,
    unit,
    name: str,
    quantity: int,
    state: RemoteState,
    created_at: datetime | None,
    payload: dict | None = None,
    retry_attempts: int = 1,
    preemption_retries: int | None = None,
    attempt_duration_seconds: int | None = None,
    tags: dict | None = None,
    how: str = "found in AWS Batch",
) -> Job:
    """A job the remote scheduler holds that the portal did not submit (an import, or a job
    submitted straight to AWS): it becomes a portal job, audited, with the state reported."""
    # Its history so far is AWS's, not news: it is written as found, without events.
    job = Job.objects.create(
        job_queue=queue,
        quota_share=share,
        share_name=share.name,
        submitted_by=None,
        capacity_unit=unit,
        name=name[:128] or "unnamed",
        quantity=max(1, quantity),
        scheduling_priority=state.scheduling_priority or 0,
        service_request_payload=payload,
        retry_attempts=min(max(retry_attempts, MIN_RETRY_ATTEMPTS), MAX_RETRY_ATTEMPTS),
        preemption_retries_before_termination=preemption_retries,
        attempt_duration_seconds=attempt_duration_seconds,
        tags=tags or {},
        created_at=created_at or timezone.now(),
        **_reported_fields(state),
    )
    record(None, EventKind.AWS_IMPORTED, job=job, share=share, by=REMOTE, how=how)
    _write_attempts(job, state.attempts)
    queue_changed(queue.pk)
    return job


@transaction.atomic
def reject_unpushed(job: Job, reason: str, now: datetime | None = None) -> bool:
    """The remote scheduler refused a job the portal accepted (a payload it will never take):
    it ends FAILED with that reason instead of being pushed again and again."""
    now = now or timezone.now()
    ended = Job.objects.filter(pk=job.pk, status=JobStatus.RUNNABLE).update(
        status=JobStatus.FAILED, status_reason=reason, stopped_at=now, pending_reason=""
    )
    if ended:
        record(None, EventKind.FAILED, job=job, share=job.quota_share, when=now, reason=reason)
        queue_changed(job.job_queue_id)
    return bool(ended)
