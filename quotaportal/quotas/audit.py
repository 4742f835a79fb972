"""Writing the audit log: every service that changes state records who did it."""

from __future__ import annotations

from django.utils import timezone

from quotaportal.quotas.models import Event
from quotaportal.quotas.permissions import actor_name


def record(actor, kind: str, *, job=None, share=None, queue=None, when=None, **detail) -> Event:
    return Event.objects.create(
        time=when or timezone.now(),
        actor=actor,
        actor_name=actor_name(actor),
        kind=kind,
        job=job,
        share=share,
        job_queue=queue
        or (job.job_queue if job is not None else getattr(share, "job_queue", None)),
        detail=detail,
    )


def event_row(
    kind: str, *, job_id=None, queue_id=None, share_id=None, when=None, **detail
) -> Event:
    """An unsaved system event, for bulk_create by the tick."""
    return Event(
        time=when or timezone.now(),
        actor=None,
        actor_name="system",
        kind=kind,
        job_id=job_id,
        job_queue_id=queue_id,
        share_id=share_id,
        detail=detail,
    )
