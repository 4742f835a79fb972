from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def as_user(people):
    """as_user("alice") -> an API client with alice's token; as_user(None) -> anonymous."""

    def make(name: str | None) -> APIClient:
        client = APIClient()
        if name:
            client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens[name]}")
        return client

    return make


@pytest.fixture
def cached_in_redis(settings):
    """Lookups cached between requests need Redis (quotas.config_cache): name one even where the
    suite runs without REDIS_URL."""
    settings.REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
