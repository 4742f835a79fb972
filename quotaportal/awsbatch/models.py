"""Access keys for the AWS-compatible endpoint: one user's key pairs for SigV4."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from quotaportal.quotas.models import FINAL
from quotaportal.quotas.models.connections import ConnectionHealth


class AccessKey(models.Model):
    """An AWS-style access key pair of a user. SigV4 is an HMAC, so checking a signature needs
    the secret itself (as AWS keeps it); it is shown once, at creation, and never on a page."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="aws_access_keys"
    )
    access_key_id = models.CharField(max_length=32, unique=True)
    secret_access_key = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.access_key_id} ({self.user})"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class SyncState(ConnectionHealth):
    """How the sync of one AWS_BATCH service environment is going (shown on the dashboard)."""

    environment = models.OneToOneField(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="aws_sync"
    )


class MirrorKind(models.TextChoices):
    POLICY = "policy"
    ENVIRONMENT = "environment"
    QUEUE = "queue"
    SHARE = "share"


class MirroredResource(models.Model):
    """What the portal and AWS last agreed on for one resource it mirrors: the base of the
    three-way comparison that tells a portal edit (push it) from an AWS console edit (drift).

    `aws` holds AWS's differing configuration while drift is unresolved."""

    environment = models.ForeignKey(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="aws_mirrors"
    )
    kind = models.CharField(max_length=16, choices=MirrorKind.choices)
    name = models.CharField(max_length=260)  # a share's is "queue/share"
    arn = models.CharField(max_length=512, blank=True)
    synced = models.JSONField(default=dict, blank=True)
    aws = models.JSONField(null=True, blank=True)
    drift_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["environment", "kind", "name"], name="mirror_unique_per_environment"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


class RemoteJob(models.Model):
    """A portal job's AWS Batch twin: its AWS id, what was pushed, what was last pulled."""

    job = models.OneToOneField(
        "quotas.Job", on_delete=models.CASCADE, primary_key=True, related_name="remote"
    )
    aws_job_id = models.CharField(max_length=64, unique=True)
    aws_job_arn = models.CharField(max_length=512, blank=True)
    pushed_at = models.DateTimeField(default=timezone.now)
    pushed_priority = models.PositiveSmallIntegerField(default=0)
    terminate_sent_at = models.DateTimeField(null=True, blank=True)
    aws_status = models.CharField(max_length=10, blank=True)
    latest_attempt = models.CharField(max_length=512, blank=True)
    pulled_at = models.DateTimeField(null=True, blank=True)
    # From GetJobQueueSnapshot: place among the first RUNNABLE jobs of the queue (1 = next),
    # and whether it heads its quota share. None when AWS did not list it.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    share_head = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.aws_job_id

    @property
    def done(self) -> bool:
        """Final in AWS (and so here): nothing is left to sync."""
        return self.aws_status in FINAL
