"""A REST token's lookup is cached between requests (api.authentication), yet a revoked token,
a replaced one or a deactivated user is refused by the very next request: for personal tokens
and for the legacy DRF tokens that keep working beside them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import update_last_login
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from quotaportal.api.authentication import CachedTokenAuthentication
from quotaportal.quotas.models import PersonalToken
from quotaportal.quotas.services import accounts

pytestmark = pytest.mark.usefixtures("cached_in_redis")


def get(key: str):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/v1/job-queues/")


TOKEN_TABLES = (Token._meta.db_table, PersonalToken._meta.db_table)


def token_queries(key: str) -> int:
    """How many of the request's statements read a token table."""
    with CaptureQueriesContext(connection) as captured:
        assert get(key).status_code == 200
    return sum(
        q["sql"].lstrip().upper().startswith("SELECT") and any(t in q["sql"] for t in TOKEN_TABLES)
        for q in captured.captured_queries
    )


@pytest.fixture(params=["personal", "legacy"])
def alice_key(request, people) -> str:
    """Alice's key: the personal token every test user gets, or a legacy DRF token."""
    if request.param == "legacy":
        return Token.objects.create(user=people.alice).key
    return people.tokens["alice"]


def test_a_token_is_looked_up_once_then_cached(alice_key):
    key = alice_key
    assert token_queries(key) == 1
    assert token_queries(key) == 0


def test_without_redis_every_request_looks_its_token_up(alice_key, settings):
    settings.REDIS_URL = ""
    key = alice_key
    assert token_queries(key) == 1
    assert token_queries(key) == 1


def test_a_revoked_token_is_refused_by_the_next_request(people, alice_key):
    key = alice_key
    assert get(key).status_code == 200
    accounts.revoke_api_token(people.admin, people.alice)
    assert get(key).status_code == 401


def test_a_token_an_admin_makes_works_at_once_and_dies_with_the_rest(people, alice_key):
    assert get(alice_key).status_code == 200
    new = accounts.new_api_token(people.admin, people.alice)
    assert get(new).status_code == 200
    accounts.revoke_api_token(people.admin, people.alice)
    assert get(alice_key).status_code == 401
    assert get(new).status_code == 401


def test_a_deactivated_user_is_refused_by_the_next_request(people, alice_key):
    key = alice_key
    assert get(key).status_code == 200
    accounts.set_active(people.admin, people.alice, False)
    refused = get(key)
    assert refused.status_code == 401
    assert "inactive" in refused.json()["detail"].lower()


def test_a_wrong_key_is_refused_every_time(people):
    for _ in range(2):
        assert get("0" * 40).status_code == 401
        assert get("qp_" + "0" * 43).status_code == 401


def test_a_login_elsewhere_keeps_the_lookup(people, alice_key):
    key = alice_key
    assert token_queries(key) == 1
    update_last_login(None, people.alice)  # what signing in to the web pages does
    assert token_queries(key) == 0


def test_each_request_gets_its_own_user_object(people):
    auth = CachedTokenAuthentication()
    first, _ = auth.authenticate_credentials(people.tokens["alice"])
    second, token = auth.authenticate_credentials(people.tokens["alice"])
    assert first is not second
    assert first.pk == second.pk == token.user_id == people.alice.pk
