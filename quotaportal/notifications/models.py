"""Webhooks, what was delivered to them (and by e-mail), and who wants e-mail."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from quotaportal.quotas.models import Event, JobQueue, Team


class DetailType(models.TextChoices):
    """AWS Batch's EventBridge detail-types for service jobs."""

    STATE_CHANGE = "Batch Service Job State Change"
    PREEMPTION_STARTED = "Batch Service Job Preemption Started"
    PREEMPTION_COMPLETED = "Batch Service Job Preemption Completed"


class WebhookFormat(models.TextChoices):
    EVENTBRIDGE = "eventbridge", "AWS EventBridge event (JSON)"
    SLACK = "slack", "Slack incoming webhook"


class Webhook(models.Model):
    """An admin's subscription: events matching its filters are POSTed to its URL, signed."""

    name = models.CharField(max_length=128, unique=True)
    url = models.URLField(max_length=2048)
    # Kept to sign each body (HMAC needs it); never shown again after it is set.
    secret = models.CharField(max_length=256)
    format = models.CharField(
        max_length=16, choices=WebhookFormat.choices, default=WebhookFormat.EVENTBRIDGE
    )
    # Empty filters match everything.
    detail_types = models.JSONField(default=list, blank=True)
    job_queues = models.ManyToManyField(JobQueue, blank=True, related_name="+")
    teams = models.ManyToManyField(Team, blank=True, related_name="+")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    # A sender holds the webhook until then: one sender at a time keeps its deliveries in
    # order, and a sender that died lets go when the lease runs out.
    leased_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DeliveryStatus(models.TextChoices):
    PENDING = "PENDING"  # not yet accepted; retried with backoff
    DELIVERED = "DELIVERED"
    GAVE_UP = "GAVE_UP"  # still refused when its retry window closed


class Delivery(models.Model):
    """One event for one webhook (or one e-mail to one person): the body as sent, and how
    each try went."""

    webhook = models.ForeignKey(
        Webhook, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True
    )
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    detail_type = models.CharField(max_length=64, choices=DetailType.choices)
    # The exact bytes signed and sent (an e-mail: its subject, a blank line, its text).
    body = models.TextField()
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    created_at = models.DateTimeField(default=timezone.now)
    tries = models.PositiveIntegerField(default=0)
    next_try_at = models.DateTimeField(default=timezone.now)
    last_tried_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # A sender's next work: the oldest pending delivery of each webhook.
            models.Index(
                fields=["webhook", "id"],
                condition=Q(status="PENDING"),
                name="delivery_pending",
            ),
            models.Index(fields=["webhook", "-id"], name="delivery_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(webhook__isnull=False) | Q(recipient__isnull=False),
                name="delivery_has_a_destination",
            ),
        ]


class EmailPreference(models.Model):
    """Which of a person's own jobs' events reach them by e-mail (all off until they opt in)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_preference"
    )
    on_preempted = models.BooleanField(default=False)
    on_failed = models.BooleanField(default=False)
    on_succeeded = models.BooleanField(default=False)
