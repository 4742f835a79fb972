"""A REST token's lookup is kept between requests (api.authentication), yet a revoked token,
a replaced one or a deactivated user is refused by the very next request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import update_last_login
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from quotaportal.api.authentication import CachedTokenAuthentication
from quotaportal.quotas.services import accounts

pytestmark = pytest.mark.usefixtures("kept_in_redis")


def get(key: str):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/v1/job-queues/")


def token_queries(key: str) -> int:
    """How many of the request's statements read the token table."""
    with CaptureQueriesContext(connection) as captured:
        assert get(key).status_code == 200
    return sum(Token._meta.db_table in q["sql"] for q in captured.captured_queries)


def test_a_token_is_looked_up_once_then_kept(people):
    key = people.tokens["alice"]
    assert token_queries(key) == 1
    assert token_queries(key) == 0


def test_without_redis_every_request_looks_its_token_up(people, settings):
    settings.REDIS_URL = ""
    key = people.tokens["alice"]
    assert token_queries(key) == 1
    assert token_queries(key) == 1


def test_a_revoked_token_is_refused_by_the_next_request(people):
    key = people.tokens["alice"]
    assert get(key).status_code == 200
    accounts.revoke_api_token(people.admin, people.alice)
    assert get(key).status_code == 401


def test_a_replaced_token_stops_working_and_the_new_one_works(people):
    old = people.tokens["alice"]
    assert get(old).status_code == 200
    new = accounts.new_api_token(people.admin, people.alice)
    assert get(old).status_code == 401
    assert get(new).status_code == 200


def test_a_deactivated_user_is_refused_by_the_next_request(people):
    key = people.tokens["alice"]
    assert get(key).status_code == 200
    accounts.set_active(people.admin, people.alice, False)
    refused = get(key)
    assert refused.status_code == 401
    assert "inactive" in refused.json()["detail"].lower()


def test_a_wrong_key_is_refused_every_time(people):
    for _ in range(2):
        assert get("0" * 40).status_code == 401


def test_a_login_elsewhere_keeps_the_lookup(people):
    key = people.tokens["alice"]
    assert token_queries(key) == 1
    update_last_login(None, people.alice)  # what signing in to the web pages does
    assert token_queries(key) == 0


def test_each_request_gets_its_own_user_object(people):
    auth = CachedTokenAuthentication()
    first, _ = auth.authenticate_credentials(people.tokens["alice"])
    second, token = auth.authenticate_credentials(people.tokens["alice"])
    assert first is not second
    assert first.pk == second.pk == token.user_id == people.alice.pk
