"""Admins manage webhooks; each person chooses which of their jobs' events reach them by
e-mail. Every change is checked here, for every interface, and audited."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction

from quotaportal.notifications.models import (
    DetailType,
    EmailPreference,
    Webhook,
    WebhookFormat,
)
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import EventKind, JobQueue, Team
from quotaportal.quotas.names import shortened
from quotaportal.quotas.permissions import require_admin

MIN_SECRET = 16
FIELDS = ("name", "url", "secret", "format", "detail_types", "job_queues", "teams", "enabled")
_check_url = URLValidator(schemes=["http", "https"])


def create_webhook(actor, **fields) -> Webhook:
    require_admin(actor, "add webhooks")
    missing = [f for f in ("name", "url", "secret") if not fields.get(f)]
    if missing:
        raise InvalidInput({f: f"{f} is required" for f in missing})
    return _save(actor, Webhook(created_by=actor), fields, "created")


def update_webhook(actor, webhook: Webhook, **fields) -> Webhook:
    require_admin(actor, "change webhooks")
    return _save(actor, webhook, fields, "changed")


def delete_webhook(actor, webhook: Webhook) -> None:
    require_admin(actor, "delete webhooks")
    with transaction.atomic():
        record(
            actor,
            EventKind.RESOURCE_CHANGED,
            action="deleted",
            resource="webhook",
            name=webhook.name,
        )
        webhook.delete()


def _save(actor, webhook: Webhook, fields: dict, action: str) -> Webhook:
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise InvalidInput(dict.fromkeys(unknown, "not a webhook field"))
    values, queues, teams = _checked(fields)
    for name, value in values.items():
        setattr(webhook, name, value)
    try:
        with transaction.atomic():
            webhook.save()
            if queues is not None:
                webhook.job_queues.set(queues)
            if teams is not None:
                webhook.teams.set(teams)
            record(
                actor,
                EventKind.RESOURCE_CHANGED,
                action=action,
                resource="webhook",
                name=webhook.name,
            )
    except IntegrityError:
        raise Conflict(f"a webhook named {shortened(webhook.name)} exists already") from None
    return webhook


def _checked(fields: dict) -> tuple[dict, list | None, list | None]:
    """The plain field values, and the queues and teams named (None: not given)."""
    errors, values = {}, {}
    for name, check in CHECKS.items():
        if name in fields:
            try:
                values[name] = check(fields[name])
            except ValueError as err:
                errors[name] = str(err)
    queues = teams = None
    if "job_queues" in fields:
        queues = _named(JobQueue, fields["job_queues"], "job queue", errors, "job_queues")
    if "teams" in fields:
        teams = _named(Team, fields["teams"], "team", errors, "teams")
    if errors:
        raise InvalidInput(errors)
    return values, queues, teams


def _name(value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 128:
        raise ValueError("give a name of 1 to 128 characters")
    if not value.isprintable():
        raise ValueError("use printable characters only")
    return value.strip()


def _url(value) -> str:
    if not isinstance(value, str) or len(value) > 2048:
        raise ValueError("give an http:// or https:// URL of up to 2048 characters")
    try:
        _check_url(value)
    except ValidationError:
        raise ValueError(f"use an http:// or https:// URL (not {shortened(value)})") from None
    return value


def _secret(value) -> str:
    if not isinstance(value, str) or not MIN_SECRET <= len(value) <= 256:
        raise ValueError(f"give a secret of {MIN_SECRET} to 256 characters (a random string)")
    return value


def _format(value) -> str:
    if value not in WebhookFormat.values:
        raise ValueError(f"format must be one of {', '.join(WebhookFormat.values)}")
    return value


def _detail_types(value) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("give a list of event types (empty: all)")
    unknown = [v for v in value if v not in DetailType.values]
    if unknown:
        raise ValueError(
            f"unknown event type {shortened(unknown[0])}; one of: {', '.join(DetailType.values)}"
        )
    return sorted(set(value))


def _enabled(value) -> bool:
    if not isinstance(value, bool):
        raise ValueError("enabled must be true or false")
    return value


CHECKS = {
    "name": _name,
    "url": _url,
    "secret": _secret,
    "format": _format,
    "detail_types": _detail_types,
    "enabled": _enabled,
}


def _named(model, names, what: str, errors: dict, field: str) -> list:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        errors[field] = f"give a list of {what} names (empty: all)"
        return []
    found = list(model.objects.filter(name__in=names))
    missing = sorted(set(names) - {row.name for row in found})
    if missing:
        errors[field] = f"no {what} named {shortened(missing[0])}"
    return found


def email_preference(user) -> EmailPreference:
    return EmailPreference.objects.filter(user=user).first() or EmailPreference(user=user)


def set_email_preference(user, *, on_preempted: bool, on_failed: bool, on_succeeded: bool):
    """A person's own choice; e-mail needs an address, so turning any on without one fails."""
    if (on_preempted or on_failed or on_succeeded) and not user.email:
        raise InvalidInput({"email": "your account has no e-mail address; ask an admin to add one"})
    preference = email_preference(user)
    preference.on_preempted, preference.on_failed = on_preempted, on_failed
    preference.on_succeeded = on_succeeded
    preference.save()
    return preference
