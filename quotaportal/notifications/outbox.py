"""From the audit log to deliveries: committed events that no publisher has seen yet become
one Delivery per matching webhook (and per opted-in submitter), and are marked published in
the same transaction, so a crash in between publishes them again rather than never."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from quotaportal.infra.bulk import insert_new
from quotaportal.infra.locks import try_lock
from quotaportal.notifications import envelopes
from quotaportal.notifications.models import (
    Delivery,
    DetailType,
    EmailPreference,
    Webhook,
    WebhookFormat,
)
from quotaportal.quotas.models import Event, Job, JobAttempt, JobStatus

log = logging.getLogger(__name__)
BATCH = 500


def publish(max_batches: int = 20) -> int:
    """Publish what is waiting, oldest first, a batch per transaction; how many events were
    published. Another publisher at work: this one leaves it to that one."""
    published = 0
    for _ in range(max_batches):
        with transaction.atomic():
            if not try_lock("event_publish"):
                return published
            audience = Audience()
            if audience.empty:  # nobody listens: what waits is published as it is
                return published + Event.objects.filter(published=False).update(published=True)
            events = list(Event.objects.filter(published=False).order_by("id")[:BATCH])
            if not events:
                return published
            insert_new(deliveries_for(events, audience))
            Event.objects.filter(pk__in=[e.pk for e in events]).update(published=True)
        published += len(events)
    return published


class Audience:
    """Who listens: the enabled webhooks with their filters, and who wants e-mail."""

    def __init__(self):
        self.webhooks = list(
            Webhook.objects.filter(enabled=True).prefetch_related("job_queues", "teams")
        )
        self.queue_filters = {w.pk: {q.pk for q in w.job_queues.all()} for w in self.webhooks}
        self.team_filters = {w.pk: {t.pk for t in w.teams.all()} for w in self.webhooks}
        self.email = {
            p.user_id: p
            for p in EmailPreference.objects.filter(user__is_active=True).exclude(
                on_preempted=False, on_failed=False, on_succeeded=False
            )
        }

    @property
    def empty(self) -> bool:
        return not self.webhooks and not self.email

    def webhooks_for(self, notice: envelopes.Notice, job: Job) -> list[Webhook]:
        team_id = job.quota_share.team_id if job.quota_share else None
        return [
            w
            for w in self.webhooks
            if (not w.detail_types or notice.detail_type in w.detail_types)
            and (not self.queue_filters[w.pk] or job.job_queue_id in self.queue_filters[w.pk])
            and (not self.team_filters[w.pk] or team_id in self.team_filters[w.pk])
        ]

    def wants_email(self, notice: envelopes.Notice, job: Job) -> bool:
        preference = self.email.get(job.submitted_by_id)
        if preference is None or not job.submitted_by.email:
            return False
        if notice.detail_type == DetailType.PREEMPTION_STARTED:
            return preference.on_preempted
        if notice.detail_type == DetailType.STATE_CHANGE:
            return (notice.status == JobStatus.FAILED and preference.on_failed) or (
                notice.status == JobStatus.SUCCEEDED and preference.on_succeeded
            )
        return False


def deliveries_for(events: list[Event], audience: Audience) -> list[Delivery]:
    """The deliveries these events make for this audience, in event order."""
    job_ids = {e.job_id for e in events if e.job_id is not None}
    if audience.empty or not job_ids:
        return []
    jobs = _jobs(job_ids)
    made = []
    for event in events:
        job = jobs.get(event.job_id)
        if job is None:
            continue
        try:
            made += _for_event(event, job, audience)
        except Exception:  # one event that cannot be said must not hold back the rest
            log.exception("could not make the notifications of event %s; it is skipped", event.pk)
    return made


def _for_event(event: Event, job: Job, audience: Audience) -> list[Delivery]:
    made = []
    for notice in envelopes.notices(event, job):
        made += _for_webhooks(event, notice, job, audience)
        if audience.wants_email(notice, job):
            subject, text = envelopes.email_text(notice, job)
            body = f"{subject}\n\n{text}"
            made.append(_delivery(event, notice, body, recipient=job.submitted_by))
    return made


def _for_webhooks(event, notice, job, audience: Audience) -> list[Delivery]:
    bodies = {}
    made = []
    for webhook in audience.webhooks_for(notice, job):
        if webhook.format not in bodies:
            bodies[webhook.format] = (
                envelopes.slack_body(notice, job)
                if webhook.format == WebhookFormat.SLACK
                else notice.json()
            )
        made.append(_delivery(event, notice, bodies[webhook.format], webhook=webhook))
    return made


def _delivery(event, notice, body: str, *, webhook=None, recipient=None) -> Delivery:
    now = timezone.now()
    return Delivery(
        webhook=webhook,
        recipient=recipient,
        event_id=event.pk,
        detail_type=notice.detail_type,
        body=body,
        created_at=now,
        next_try_at=now,
    )


def _jobs(job_ids) -> dict:
    return {
        job.pk: job
        for job in Job.objects.filter(pk__in=job_ids)
        .select_related("job_queue", "capacity_unit", "quota_share", "submitted_by")
        .prefetch_related(Prefetch("attempts", queryset=JobAttempt.objects.order_by("number")))
    }
