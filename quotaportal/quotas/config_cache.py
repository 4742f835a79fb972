"""The rows a submit is checked against, cached between requests while they stay the same.

Every submit looks up its queue, share, unit, the environment's capacity, the share's limits
and the submitter's teams: six queries, a third of a submit's time, for rows an admin changes
a few times a day. They are cached in this process under the configuration's generation, a
counter in Redis that every change to those rows raises, right away and again once the change
commits (the signals at the end, on save and delete of each such model). A submit reads the
generation first and uses only what was looked up under it. Whatever is looked up after that
read is at least as new as the generation, so every submit that starts after a change has
committed sees the change, as it would reading the rows itself. A request reads the
generation once, at its first lookup (its token's check, api.authentication), and its later
lookups use the same entries: one Redis round trip per request, not one per lookup.

Entries last MAX_AGE_SECONDS at most, and the capacity a reservation adds no longer than the
reservation lasts, so even a change made around the ORM's signals (raw SQL) is seen soon.
Without Redis nothing is cached: a process could not see another's changes.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.utils import timezone

from quotaportal.infra import redis_client
from quotaportal.quotas import models

log = logging.getLogger(__name__)

MAX_AGE_SECONDS = 10.0


def generation_key() -> str:
    return redis_client.key("config-generation")


class CachedLookups(dict):
    """The lookups made under one generation, until `expires` (a monotonic time)."""

    def __init__(self, generation: bytes | None):
        super().__init__()
        self.generation = generation
        self.expires = time.monotonic() + MAX_AGE_SECONDS

    def expire_by(self, when: datetime) -> None:
        """Drop everything at `when` at the latest (a reservation counted here ends then)."""
        left = (when - timezone.now()).total_seconds()
        self.expires = min(self.expires, time.monotonic() + max(left, 0.0))


_cached: CachedLookups | None = None
# Between request_started and request_finished, the lookups this thread's request read first.
_request = threading.local()


def cached_lookups() -> dict:
    """The lookups a submit may use: those of the current generation, or an empty dict of
    its own when nothing can be cached (no Redis, or Redis did not answer). Within a request,
    those its first call returned."""
    held = getattr(_request, "cached", None)
    if held is not None:
        return held
    found = _current()
    if getattr(_request, "active", False):
        _request.cached = found
    return found


def _current() -> dict:
    global _cached
    if not settings.REDIS_URL:
        return {}
    try:
        generation = redis_client.client(settings.REDIS_URL).get(generation_key())
    except Exception:  # Redis's errors vary; the rows are read as if nothing were cached
        log.warning("could not read the configuration generation; looking rows up afresh")
        return {}
    current = _cached
    if current is None or current.generation != generation or time.monotonic() >= current.expires:
        current = _cached = CachedLookups(generation)
    return current


def forget() -> None:
    """Drop this process's lookups (tests, whose rows vanish with each test's transaction)."""
    global _cached
    _cached = None
    _request.cached = None


def _request_started(sender, **kwargs) -> None:
    _request.active, _request.cached = True, None


def _request_finished(sender, **kwargs) -> None:
    _request.active, _request.cached = False, None


def config_changed() -> None:
    """A row submits are checked against changed: raise the generation now (so this
    transaction's own later submits look again) and once it commits (so no submit elsewhere
    keeps what it read before the commit under the new generation)."""
    if not settings.REDIS_URL:
        return
    _raise_generation()
    transaction.on_commit(_raise_generation)


def _raise_generation() -> None:
    forget()  # this process sees its own change even when Redis does not answer
    try:
        redis_client.client(settings.REDIS_URL).incr(generation_key())
    except Exception:  # the other processes' entries expire within MAX_AGE_SECONDS anyway
        log.exception("could not raise the configuration generation")


def _changed(sender, **kwargs) -> None:
    config_changed()


def _user_changed(sender, update_fields=None, **kwargs) -> None:
    # A login only stamps last_login: nothing a token's check reads.
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return
    config_changed()


# The models whose rows a submit's checks read; a save or delete of any raises the generation.
CHECKED_MODELS = (
    "CapacityUnit",
    "EnvironmentCapacity",
    "JobQueue",
    "Membership",
    "PersonalToken",
    "QuotaShare",
    "Reservation",
    "ServiceEnvironment",
    "ShareCapacityLimit",
    "Team",
)


def connect_signals() -> None:
    """Called once, from the app's ready()."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    # REST tokens (personal ones are in CHECKED_MODELS) and their users are cached too
    # (api.authentication).
    for name, model in [(n, getattr(models, n)) for n in CHECKED_MODELS] + [("Token", Token)]:
        post_save.connect(_changed, sender=model, dispatch_uid=f"lookups-save-{name}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"lookups-del-{name}")
    user = get_user_model()
    post_save.connect(_user_changed, sender=user, dispatch_uid="lookups-save-user")
    post_delete.connect(_changed, sender=user, dispatch_uid="lookups-del-user")
    m2m_changed.connect(
        _changed, sender=models.Team.members.through, dispatch_uid="lookups-members"
    )
    request_started.connect(_request_started, dispatch_uid="lookups-request-started")
    request_finished.connect(_request_finished, dispatch_uid="lookups-request-finished")
