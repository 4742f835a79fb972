"""How a backend's connection to a remote scheduler is going (AWS Batch, Slurm): one row per
service environment, shown on the dashboard, the fleet page and the environment page."""

from __future__ import annotations

from django.db import models


class ConnectionHealth(models.Model):
    """The last attempt to reach the remote scheduler, the last success, and the failures in
    a row that set the backoff (quotas.services.connections records them)."""

    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0)  # in a row; sets the backoff
    backoff_until = models.DateTimeField(null=True, blank=True)
    last_calls = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True

    @property
    def healthy(self) -> bool:
        return self.failures == 0 and self.last_success_at is not None

    def backing_off(self, now) -> bool:
        return self.backoff_until is not None and now < self.backoff_until
