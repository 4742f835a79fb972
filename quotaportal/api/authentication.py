"""REST token authentication whose lookups are kept between requests.

DRF's TokenAuthentication reads the token and its user on every request: on a submit, one
statement in five, for rows that change only when a token is made or revoked or a user is
edited. Here a token found valid is kept with the submit lookups (quotas.lookups): under the
configuration generation, which every save or delete of a token or a user raises (signals
below) at once and again at commit, so a revoked token or a deactivated user is refused by
the next request in every process; and for MAX_AGE_SECONDS at most. A key that fails is not
kept (each try costs a lookup, as before). Without Redis nothing is kept.
"""

from __future__ import annotations

import copy

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from quotaportal.quotas import lookups


class KeptTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str):
        kept = lookups.kept()
        found = kept.get(("token", key))
        if found is None:
            found = kept[("token", key)] = super().authenticate_credentials(key)
        user, token = found
        # Each request its own copy: a request may cache things on its user (permissions).
        return copy.copy(user), token


def _token_changed(sender, **kwargs) -> None:
    lookups.config_changed()


def _user_changed(sender, update_fields=None, **kwargs) -> None:
    # A login only stamps last_login: nothing a token's check reads.
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return
    lookups.config_changed()


def connect_signals() -> None:
    """Called once, from the app's ready()."""
    user = get_user_model()
    post_save.connect(_token_changed, sender=Token, dispatch_uid="kept-token-save")
    post_delete.connect(_token_changed, sender=Token, dispatch_uid="kept-token-delete")
    post_save.connect(_user_changed, sender=user, dispatch_uid="kept-token-user-save")
    post_delete.connect(_token_changed, sender=user, dispatch_uid="kept-token-user-delete")
