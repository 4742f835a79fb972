"""Which accounts an identity provider vouches for."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ProviderAccount(models.Model):
    """A user who signs in through the OpenID Connect provider: its issuer and subject (the
    claim that never changes, unlike a username or an address) name them there."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_account"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)  # as of the last sign-in
    last_sign_in = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="provider_account_unique")
        ]
