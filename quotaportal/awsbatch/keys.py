"""AWS access keys: the identities the AWS-compatible endpoint signs requests with."""

from __future__ import annotations

import secrets
import string

from django.utils import timezone

from quotaportal.awsbatch.models import AccessKey
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, Forbidden
from quotaportal.quotas.models import EventKind
from quotaportal.quotas.permissions import is_platform_admin

MAX_ACTIVE_KEYS = 2  # AWS allows two per IAM user, so rotation works without a gap
_ID_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits


def _require_self_or_admin(actor, user, action: str) -> None:
    if actor is not None and actor.pk != user.pk and not is_platform_admin(actor):
        raise Forbidden(f"only admins can {action} for another user")


def create_access_key(actor, user) -> tuple[AccessKey, str]:
    """A new key pair for `user`; the secret is returned here and never shown again."""
    _require_self_or_admin(actor, user, "create access keys")
    if not user.is_active:
        raise Conflict(f"user {user.get_username()} is deactivated")
    if user.aws_access_keys.filter(revoked_at__isnull=True).count() >= MAX_ACTIVE_KEYS:
        raise Conflict(
            f"{user.get_username()} already has {MAX_ACTIVE_KEYS} active access keys; "
            "revoke one first"
        )
    # Letters and digits only: a secret never starts with '-' or needs quoting in a shell.
    secret = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40))
    key = AccessKey.objects.create(
        user=user,
        access_key_id="QPAK" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(16)),
        secret_access_key=secret,
    )
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action="created",
        resource="access key",
        name=key.access_key_id,
        user=user.get_username(),
    )
    return key, secret


def revoke_access_key(actor, key: AccessKey) -> AccessKey:
    _require_self_or_admin(actor, key.user, "revoke access keys")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        record(
            actor,
            EventKind.RESOURCE_CHANGED,
            action="revoked",
            resource="access key",
            name=key.access_key_id,
            user=key.user.get_username(),
        )
    return key


def active_key(access_key_id: str) -> AccessKey | None:
    """The key a signed request names, if it may still be used (its user active too)."""
    key = (
        AccessKey.objects.select_related("user")
        .filter(access_key_id=access_key_id, revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if key is not None:
        now = timezone.now()
        # Written at most once a minute: a busy client must not turn every call into a write.
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
            AccessKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key
