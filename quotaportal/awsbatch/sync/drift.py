"""Drift: a quota share changed in AWS's console, and an admin's answer (keep the portal's
value, or adopt AWS's)."""

from __future__ import annotations

from django.db import transaction

from quotaportal.awsbatch.models import MirroredResource, MirrorKind
from quotaportal.awsbatch.sync.comparable import share_config
from quotaportal.awsbatch.sync.mirror import share_key
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import EventKind
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.shares import update_share
from quotaportal.tick.changes import queue_changed

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
