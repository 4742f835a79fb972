"""Writes of the awsbatch app: access keys, and admins' answers to drift. Everything the
endpoint does to the domain goes through quotaportal.quotas.services."""

from __future__ import annotations

import secrets
import string

from django.db import transaction
from django.utils import timezone

from quotaportal.awsbatch.models import AccessKey, MirroredResource, MirrorKind
from quotaportal.awsbatch.sync.mirror import share_key
from quotaportal.awsbatch.sync.shapes import share_config
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import EventKind
from quotaportal.quotas.permissions import is_platform_admin, require_admin
from quotaportal.quotas.services.audit import record
from quotaportal.quotas.services.shares import update_share
from quotaportal.quotas.services.ticks import queue_changed

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


DRIFT_DECISIONS = ("keep", "adopt")


def drift_of(share) -> MirroredResource | None:
    """The unresolved drift of a share of an AWS_BATCH queue: AWS's values, or None."""
    return MirroredResource.objects.filter(
        environment_id=share.job_queue.service_environment_id,
        kind=MirrorKind.SHARE,
        name=share_key(share.job_queue.name, share.name),
        aws__isnull=False,
    ).first()


def drift_rows(share, row: MirroredResource) -> list[tuple[str, object, object]]:
    """(field, the portal's value, AWS's value) for each field that differs."""
    portal = share_config(share)
    return [
        (key, portal[key], row.aws.get(key)) for key in portal if portal[key] != row.aws.get(key)
    ]


@transaction.atomic
def resolve_drift(actor, share, decision: str) -> None:
    """An admin's answer to a share changed in the AWS console: keep the portal's value (the
    next sync pushes it) or adopt AWS's (the share is changed through the share service)."""
    require_admin(actor, "resolve drift of quota shares")
    if decision not in DRIFT_DECISIONS:
        raise InvalidInput({"decision": "choose keep (the portal's value) or adopt (AWS's)"})
    row = drift_of(share)
    if row is None:
        raise Conflict(f"quota share {share.name} has no unresolved drift")
    aws, portal = row.aws, share_config(share)
    if decision == "adopt":
        update_share(actor, share, **{key: aws[key] for key in portal if portal[key] != aws[key]})
        row.synced = share_config(share)
    else:
        row.synced = aws  # AWS's value is now the agreed base, so the portal's is pushed
    row.aws, row.drift_at, row.checked_at = None, None, None
    row.save()
    # The queue row's check time forces the next tick to look at the configuration.
    MirroredResource.objects.filter(
        environment_id=row.environment_id, kind=MirrorKind.QUEUE, name=share.job_queue.name
    ).update(checked_at=None)
    record(
        actor,
        EventKind.AWS_DRIFT_RESOLVED,
        share=share,
        queue=share.job_queue,
        decision=decision,
        portal=portal,
        aws=aws,
    )
    queue_changed(share.job_queue_id)
