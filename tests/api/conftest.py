from __future__ import annotations

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
