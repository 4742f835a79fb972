"""REST token authentication whose lookups are cached between requests.

Two kinds of token arrive as `Authorization: Token <key>` (or `Bearer <key>`): personal API
tokens (`qp_…`, quotas.services.tokens: hashed, named, scoped, expiring), and the legacy DRF tokens
issued before them, which keep working until their owner or an admin revokes them.

DRF's TokenAuthentication reads the token and its user on every request: on a submit, one
statement in five, for rows that change only when a token is made or revoked or a user is
edited. Here a token found valid is cached with the submit lookups (quotas.config_cache): under the
configuration generation, which every save or delete of a token or a user raises
(quotas.config_cache.connect_signals) at once and again at commit, so a
revoked token or a deactivated user is refused by the next request in every process; and for
MAX_AGE_SECONDS at most. Expiry is judged on every request, cached or not. A key that fails is
not cached (each try costs a lookup, as before). Without Redis nothing is cached.
"""

from __future__ import annotations

import copy

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS

from quotaportal.identity import audit
from quotaportal.quotas import config_cache
from quotaportal.quotas.models import PersonalToken
from quotaportal.quotas.services import tokens


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate(self, request):
        words = get_authorization_header(request).split()
        # `Bearer` is what most HTTP clients send a token as; DRF's own word is `Token`.
        if not words or words[0].lower() not in (b"token", b"bearer"):
            return None
        if len(words) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: send `Authorization: Token <key>` with the key alone."
            )
        try:
            key = words[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: the key is not text."
            ) from None
        user, token = self.authenticate_credentials(key)
        if isinstance(token, PersonalToken):
            self._check_scope(request, token)
            tokens.touch(token, audit.address(request))
        return user, token

    def authenticate_credentials(self, key: str):
        cached = config_cache.cached_lookups()
        kind = "ptoken" if tokens.looks_personal(key) else "token"
        found = cached.get((kind, key))
        if found is None:
            found = (
                self._personal(key) if kind == "ptoken" else super().authenticate_credentials(key)
            )
            cached[(kind, key)] = found
        user, token = found
        if kind == "ptoken" and (why := tokens.refusal(token)):  # it may have expired since
            cached.pop((kind, key), None)
            raise exceptions.AuthenticationFailed(why)
        # Each request its own copy: a request may cache things on its user (permissions).
        return copy.copy(user), token

    @staticmethod
    def _personal(key: str):
        token = tokens.find(key)
        if why := tokens.refusal(token):
            raise exceptions.AuthenticationFailed(why)
        return token.user, token

    @staticmethod
    def _check_scope(request, token) -> None:
        if token.read_only and request.method not in SAFE_METHODS:
            raise exceptions.PermissionDenied(
                f"API token {token.name!r} is read-only: it may read but not change anything; "
                "use a full-access token for this request."
            )
