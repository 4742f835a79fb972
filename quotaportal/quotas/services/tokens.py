"""Personal API tokens: made, named and revoked by their owner (admins may revoke anyone's),
each with a scope and an optional expiry, shown once and stored as a SHA-256 digest.

A key reads `qp_` and 43 letters and digits (256 random bits; no `-` or `_`, so a double click
selects it whole in a terminal, and a pattern of word characters finds it); the prefix tells a
personal token from a legacy DRF token on the wire (api.authentication). Each save of a
token raises the cached lookups' generation (quotas.config_cache), so a revoked token is refused
by the next request."""

from __future__ import annotations

import hashlib
import secrets
import string
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import EventKind, PersonalToken, Scope
from quotaportal.quotas.permissions import is_platform_admin

KEY_PREFIX = "qp_"
KEY_ALPHABET = string.ascii_letters + string.digits
KEY_LENGTH = 43  # 43 × log2(62) ≈ 256 bits
SHOWN_PREFIX = 10  # "qp_" and seven characters: enough to tell a person's tokens apart
MAX_NAME = 100
MAX_DAYS = 366
# Last use is written at most this often per token and address: a script calling every
# second would otherwise turn each read into a write.
TOUCH_SECONDS = 60


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_personal(key: str) -> bool:
    return key.startswith(KEY_PREFIX)


def _audit(actor, action: str, token: PersonalToken, **detail) -> None:
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action=action,
        resource="API token",
        name=token.name,
        owner=token.user.get_username(),
        prefix=token.prefix,
        **detail,
    )


def _checked_name(name) -> str:
    name = name.strip() if isinstance(name, str) else ""
    if not name:
        raise InvalidInput({"name": "give the token a name that says what uses it"})
    if len(name) > MAX_NAME:
        raise InvalidInput({"name": f"use at most {MAX_NAME} characters (got {len(name)})"})
    if not name.isprintable():
        raise InvalidInput({"name": "use printable characters only"})
    return name


def _checked_expiry(days) -> timedelta | None:
    if days in (None, ""):
        return None
    try:
        days = int(days)
    except (TypeError, ValueError):
        raise InvalidInput({"expires_in_days": "give a whole number of days"}) from None
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput({"expires_in_days": f"give 1 to {MAX_DAYS} days, or none"})
    return timedelta(days=days)


@transaction.atomic
def create_token(
    actor, owner, *, name: str, scope: str = Scope.FULL, expires_in_days=None
) -> tuple[PersonalToken, str]:
    """A new token of `owner` (the actor themself, or anyone for an admin); returns it and
    its key, which is never shown again."""
    if actor is not None and actor.pk != owner.pk and not is_platform_admin(actor):
        raise Forbidden("you can only make API tokens for yourself")
    name = _checked_name(name)
    if scope not in Scope.values:
        raise InvalidInput({"scope": f"choose {' or '.join(Scope.values)}"})
    lifetime = _checked_expiry(expires_in_days)
    key = KEY_PREFIX + "".join(secrets.choice(KEY_ALPHABET) for _ in range(KEY_LENGTH))
    now = timezone.now()
    token = PersonalToken.objects.create(
        user=owner,
        name=name,
        prefix=key[:SHOWN_PREFIX],
        digest=digest(key),
        scope=scope,
        created_at=now,
        expires_at=now + lifetime if lifetime else None,
    )
    _audit(actor, "created", token, scope=scope, expires=str(token.expires_at or "never"))
    return token, key


@transaction.atomic
def revoke_token(actor, token: PersonalToken) -> None:
    """The next request with it is refused, in every process (the save raises the lookups'
    generation)."""
    if actor is not None and actor.pk != token.user_id and not is_platform_admin(actor):
        raise Forbidden("you can only revoke your own API tokens")
    if token.revoked:
        return
    token.revoked_at = timezone.now()
    token.revoked_by = actor.get_username() if actor is not None else "system"
    token.save(update_fields=["revoked_at", "revoked_by"])
    _audit(actor, "revoked", token)


def find(key: str) -> PersonalToken | None:
    """The token of this key, with its user, whatever its state (the caller judges it)."""
    return PersonalToken.objects.select_related("user").filter(digest=digest(key)).first()


def refusal(token: PersonalToken | None, now=None) -> str | None:
    """Why this token may not be used now, in words for the caller; None when it may."""
    if token is None:
        return "Invalid token."
    if token.revoked:
        return "This API token was revoked: make a new one on your Access page."
    if token.expired(now):
        return "This API token has expired: make a new one on your Access page."
    if not token.user.is_active:
        return "User inactive or deleted."
    return None


def touch(token: PersonalToken, address: str | None, now=None) -> None:
    """Record a use, at most every TOUCH_SECONDS per address. An UPDATE without signals: a
    use changes nothing a lookup keeps, so cached lookups stay (the copy in hand is updated)."""
    now = now or timezone.now()
    fresh = token.last_used_at is not None and (now - token.last_used_at).total_seconds() < (
        TOUCH_SECONDS
    )
    if fresh and token.last_used_from == address:
        return
    PersonalToken.objects.filter(pk=token.pk).update(last_used_at=now, last_used_from=address)
    token.last_used_at, token.last_used_from = now, address


@transaction.atomic
def revoke_all(actor, owner) -> int:
    """Every token of `owner`, personal and legacy (an admin locking a person's scripts out)."""
    count = 0
    for token in PersonalToken.objects.filter(user=owner, revoked_at__isnull=True):
        revoke_token(actor, token)
        count += 1
    legacy, _ = Token.objects.filter(user=owner).delete()
    return count + legacy
