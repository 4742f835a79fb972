"""Access keys for the AWS-compatible endpoint: one user's key pairs for SigV4."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


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
