"""REST token authentication whose lookups are kept between requests.

DRF's TokenAuthentication reads the token and its user on every request: on a submit, one
statement in five, for rows that change only when a token is made or revoked or a user is
edited. Here a token found valid is kept with the submit lookups (quotas.config_cache): under the
configuration generation, which every save or delete of a token or a user raises
(quotas.config_cache.connect_signals) at once and again at commit, so a revoked token or a
deactivated user is refused by the next request in every process; and for MAX_AGE_SECONDS at
most. A key that fails is not kept (each try costs a lookup, as before). Without Redis nothing
is kept.
"""

from __future__ import annotations

import copy

from rest_framework.authentication import TokenAuthentication

from quotaportal.quotas import config_cache


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str):
        kept = config_cache.cached_lookups()
        found = kept.get(("token", key))
        if found is None:
            found = kept[("token", key)] = super().authenticate_credentials(key)
        user, token = found
        # Each request its own copy: a request may cache things on its user (permissions).
        return copy.copy(user), token
