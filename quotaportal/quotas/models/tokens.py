"""Personal API tokens: made, named and revoked by their owner, scoped and expiring."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Scope(models.TextChoices):
    READ = "read", "Read only"
    FULL = "full", "Full access"


class PersonalToken(models.Model):
    """A REST token a person made for a script. Only its SHA-256 is stored: the key is 256
    random bits, so a digest cannot be reversed or guessed, and a copy of the database signs
    nothing. `prefix` (the key's first characters) tells tokens apart on pages."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.FULL)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_from = models.GenericIPAddressField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope__in=Scope.values), name="personal_token_scope_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.user})"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now=None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    @property
    def read_only(self) -> bool:
        return self.scope == Scope.READ

    @property
    def state(self) -> str:
        if self.revoked:
            return "revoked"
        return "expired" if self.expired() else "active"
