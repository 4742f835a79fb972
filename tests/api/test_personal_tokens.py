"""Personal API tokens (quotas.services.tokens, api.authentication, the Access page): made and
named by their owner, shown once and stored hashed, scoped, expiring, revoked at once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.quotas.models import Event, PersonalToken
from quotaportal.quotas.services import tokens

pytestmark = pytest.mark.usefixtures("cached_in_redis")
JOB = {"job_queue": "gpu", "quota_share": "vision", "capacity_unit": "a100", "name": "train"}


def call(key: str, method: str = "get", path: str = "/api/v1/jobs/", word: str = "Token", **body):
    client = APIClient(REMOTE_ADDR="10.1.2.3")
    client.credentials(HTTP_AUTHORIZATION=f"{word} {key}")
    return getattr(client, method)(path, body or None, format="json")


def make_on_the_page(client, **fields):
    """Create a token through the Access page as the signed-in client; the page's answer."""
    return client.post(reverse("api-tokens"), {"scope": "full", "expires_in_days": 30, **fields})


@pytest.fixture
def alice_client(client, people):
    client.force_login(people.alice)
    return client


def test_a_token_made_on_the_page_is_shown_once_and_works(alice_client, people, fleet):
    answer = make_on_the_page(alice_client, name="sweep launcher")
    key = answer.context["key"]
    assert answer.status_code == 200
    assert re.fullmatch(r"qp_[A-Za-z0-9]{43}", key)  # selected whole by a double click
    assert key in answer.content.decode()
    assert answer["Cache-Control"].startswith("max-age=0")  # never kept by a cache
    # Shown once: the page after shows its name and prefix, never the key.
    listing = alice_client.get(reverse("api-tokens")).content.decode()
    assert "sweep launcher" in listing
    assert key[:10] in listing
    assert key not in listing

    assert call(key).status_code == 200
    submitted = call(key, "post", **JOB)
    assert submitted.status_code == 201, submitted.content
    token = PersonalToken.objects.get(name="sweep launcher")
    assert token.user == people.alice
    assert token.last_used_from == "10.1.2.3"
    assert timezone.now() - token.last_used_at < timedelta(minutes=1)
    assert (token.expires_at - timezone.now()).days == 29  # 30 days less the test's seconds


def test_the_key_is_never_stored_in_plain_text(alice_client, people):
    key = make_on_the_page(alice_client, name="notebook").context["key"]
    secret_part = key[len("qp_") + 8 :]  # beyond what the page shows as the prefix
    with connection.cursor() as cursor:
        for table in (PersonalToken._meta.db_table, Event._meta.db_table):
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 (our own table names)
            for row in cursor.fetchall():
                assert not any(secret_part in str(value) for value in row), table
    assert tokens.find(key).digest == tokens.digest(key) != key


def test_bearer_works_like_token(people, fleet):
    key = people.tokens["alice"]
    assert call(key, word="Bearer").status_code == 200
    assert call(key, word="bearer").status_code == 200


def test_an_expired_token_is_refused_with_a_reason(people, fleet, monkeypatch):
    token, key = tokens.create_token(people.alice, people.alice, name="ci", expires_in_days=1)
    assert call(key).status_code == 200  # now cached between requests
    a_day_later = timezone.now() + timedelta(days=1, seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: a_day_later)
    refused = call(key)  # the cached lookup is judged again: expiry needs no save to count
    assert refused.status_code == 401
    assert "expired" in refused.json()["detail"]


def test_a_revoked_token_is_refused_by_the_next_request(alice_client, people, fleet):
    token, key = tokens.create_token(people.alice, people.alice, name="ci")
    assert call(key).status_code == 200
    answer = alice_client.post(reverse("api-token-revoke", args=[token.pk]), follow=True)
    assert "revoked" in answer.content.decode()
    refused = call(key)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]
    assert Event.objects.filter(detail__action="revoked", detail__resource="API token").exists()


def test_a_read_only_token_reads_but_never_writes(people, fleet):
    _, key = tokens.create_token(people.alice, people.alice, name="dashboard", scope="read")
    assert call(key).status_code == 200
    refused = call(key, "post", **JOB)
    assert refused.status_code == 403
    assert "read-only" in refused.json()["detail"]
    assert not fleet.queue.jobs.exists()
    assert (
        call(key, "delete", path="/api/v1/jobs/00000000-0000-0000-0000-000000000000/").status_code
        == 403
    )


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"name": ""}, "name", "required"),
        ({"name": "x" * 101}, "name", "at most 100"),
        ({"name": "ok", "scope": "root"}, "scope", "valid choice"),
        ({"name": "ok", "expires_in_days": 5}, "expires_in_days", "valid choice"),
    ],
)
def test_bad_input_is_refused_beside_its_field(alice_client, fields, field, words):
    answer = make_on_the_page(alice_client, **fields)
    assert answer.status_code == 400
    assert words in " ".join(answer.context["form"].errors[field])
    assert not PersonalToken.objects.filter(name__startswith="x").exists()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"name": "  "}, "give the token a name"),
        ({"name": "a\nb"}, "printable"),
        ({"name": "ok", "expires_in_days": 400}, "1 to 366"),
        ({"name": "ok", "expires_in_days": "soon"}, "whole number"),
        ({"name": "ok", "scope": "admin"}, "read or full"),
    ],
)
def test_the_service_refuses_what_no_form_would_send(people, kwargs, words):
    with pytest.raises(Exception, match=words):
        tokens.create_token(people.alice, people.alice, **kwargs)


def test_nobody_makes_or_revokes_someone_elses_token(client, people):
    token, key = tokens.create_token(people.bob, people.bob, name="bob's")
    with pytest.raises(Exception, match="only make API tokens for yourself"):
        tokens.create_token(people.alice, people.bob, name="sneaky")
    client.force_login(people.alice)
    assert client.post(reverse("api-token-revoke", args=[token.pk])).status_code == 403
    assert client.get(reverse("manage-tokens")).status_code == 403
    token.refresh_from_db()
    assert not token.revoked
    assert "bob's" not in client.get(reverse("api-tokens")).content.decode()


def test_admins_see_everyones_tokens_and_revoke_them(admin_client, people, fleet):
    token, key = tokens.create_token(people.bob, people.bob, name="bob's sweep", scope="read")
    page = admin_client.get(reverse("manage-tokens")).content.decode()
    assert "bob&#x27;s sweep" in page
    assert token.prefix in page
    assert "Read only" in page
    answer = admin_client.post(
        reverse("api-token-revoke", args=[token.pk]), {"back": "manage"}, follow=True
    )
    assert answer.redirect_chain[-1][0] == reverse("manage-tokens")
    assert call(key).status_code == 401
    revoked = Event.objects.get(detail__action="revoked", detail__resource="API token")
    assert revoked.actor_name == "admin"
    assert revoked.detail["owner"] == "bob"


def test_a_legacy_token_keeps_working_until_its_owner_revokes_it(alice_client, people, fleet):
    from rest_framework.authtoken.models import Token

    legacy = Token.objects.create(user=people.alice).key
    assert call(legacy).status_code == 200
    page = alice_client.get(reverse("api-tokens")).content.decode()
    assert "Legacy token" in page
    assert legacy[:6] in page
    assert legacy not in page
    alice_client.post(reverse("legacy-token-revoke"))
    assert call(legacy).status_code == 401
    assert call(people.tokens["alice"]).status_code == 200  # her personal token is not touched


def test_a_busy_script_does_not_write_on_every_call(people, fleet):
    token, key = tokens.create_token(people.alice, people.alice, name="poller")
    call(key)
    first = PersonalToken.objects.get(pk=token.pk).last_used_at
    call(key)
    assert PersonalToken.objects.get(pk=token.pk).last_used_at == first


# Over REST.


def test_rest_lists_your_own_tokens_only(people):
    tokens.create_token(people.bob, people.bob, name="bob's")
    listed = call(people.tokens["alice"], path="/api/v1/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["made by create_user"]
    assert listed[0]["prefix"] == people.tokens["alice"][:10]
    assert "key" not in listed[0]
    assert "digest" not in listed[0]
    refused = call(people.tokens["alice"], path="/api/v1/tokens/?user=bob")
    assert refused.status_code == 403


def test_rest_makes_a_token_from_a_session_never_from_a_token(client, people):
    refused = call(people.tokens["alice"], "post", path="/api/v1/tokens/", name="child")
    assert refused.status_code == 403
    assert "cannot make tokens" in refused.json()["detail"]
    client.force_login(people.alice)
    body = {"name": "from a notebook", "scope": "read", "expires_in_days": 7}
    made = client.post("/api/v1/tokens/", body, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["scope"] == "read"
    assert made.json()["state"] == "active"
    assert call(made.json()["key"]).status_code == 200
    bad = client.post(
        "/api/v1/tokens/", {"name": "", "expires_in_days": 0}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert set(bad.json()) == {"name", "expires_in_days"}


def test_rest_revokes_your_own_and_admins_anyones(people):
    mine, my_key = tokens.create_token(people.alice, people.alice, name="mine")
    bobs, bobs_key = tokens.create_token(people.bob, people.bob, name="bob's")
    alice = people.tokens["alice"]
    assert call(alice, "delete", path=f"/api/v1/tokens/{bobs.pk}/").status_code == 404
    assert call(alice, "delete", path=f"/api/v1/tokens/{mine.pk}/").status_code == 204
    assert call(my_key).status_code == 401
    admin = people.tokens["ada"]
    listed = call(admin, path="/api/v1/tokens/?user=bob").json()["results"]
    assert {t["name"] for t in listed} == {"bob's", "made by create_user"}
    assert call(admin, path="/api/v1/tokens/?user=nobody").status_code == 404
    assert call(admin, "delete", path=f"/api/v1/tokens/{bobs.pk}/").status_code == 204
    assert call(bobs_key).status_code == 401
