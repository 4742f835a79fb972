"""From a provider's claims to an account here (identity.claims, identity.oidc), and sign-in
through the pages: what the rules take and leave, who may be linked, refusals in words."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from quotaportal.identity import claims, oidc
from quotaportal.identity.models import ProviderAccount
from quotaportal.quotas.errors import Conflict
from quotaportal.quotas.models import Event, EventKind, Membership, Team
from quotaportal.quotas.services import accounts

ISSUER = "https://id.example.org/realms/ml"
RULES = claims.Rules(
    groups_claim="groups", team_pattern=re.compile(r"team-(?P<team>[\w-]+)"), admin_group="admins"
)


def teams_of(user) -> dict[str, bool]:
    rows = Membership.objects.filter(user=user).select_related("team")
    return {m.team.name: m.from_provider for m in rows}


@pytest.mark.parametrize(
    ("value", "groups"),
    [
        (["team-a", "team-b", "team-a"], ["team-a", "team-b"]),
        ("team-a, team-b", ["team-a", "team-b"]),  # some providers send one string
        ([1, None, "", "team-a"], ["team-a"]),
        ({"team-a": True}, []),
        (None, []),
    ],
)
def test_the_groups_claim_is_read_as_a_list_of_names(value, groups):
    assert RULES.groups({"groups": value}) == groups


def test_a_huge_groups_claim_is_cut_not_trusted():
    many = [f"g{i}" for i in range(5000)]
    assert len(RULES.groups({"groups": many})) == claims.MAX_GROUPS


def test_only_groups_the_pattern_takes_become_teams_and_only_valid_names():
    rules = claims.Rules("groups", re.compile(r"ml/(?P<team>.+)"), "")
    found = rules.team_names(["ml/vision", "ml/has space", "ml/" + "x" * 65, "other", "ml/nlp"])
    assert found == {"vision": "ml/vision", "nlp": "ml/nlp"}
    whole = claims.Rules("groups", re.compile(r"gpu-\w+"), "")  # no `team` group: the whole name
    assert whole.team_names(["gpu-users", "cpu-users"]) == {"gpu-users": "gpu-users"}


@pytest.mark.parametrize(
    ("found", "username"),
    [
        ({"sub": "1", "preferred_username": "dana"}, "dana"),
        ({"sub": "1", "preferred_username": "Dana Smith (ML)"}, "Dana-Smith--ML-"),
        ({"sub": "1", "email": "eve@example.org"}, "eve"),
        ({"sub": "c0ffee"}, "c0ffee"),
        ({"sub": "9", "preferred_username": "ü" * 3}, "---"),
    ],
)
def test_usernames_are_ones_this_portal_allows(found, username):
    assert claims.username_from(found) == username


@pytest.mark.django_db
def test_claims_add_and_remove_provider_memberships_and_leave_local_ones(people):
    user = get_user_model().objects.create_user("dana")  # `people` made team vision already
    accounts.set_member(None, Team.objects.create(name="ops"), user, is_admin=False)
    first = {"sub": "s-1", "groups": ["team-vision", "team-research", "admins"], "email": "d@x.org"}
    assert claims.apply(user, first, ISSUER, RULES) == [
        "joined research",
        "joined vision",
        "became an admin",
    ]
    assert teams_of(user) == {"vision": True, "research": True, "ops": False}
    assert user.is_staff
    assert user.email == "d@x.org"
    assert Event.objects.filter(detail__action="created", detail__name="research").exists()
    # The same claims again change nothing and write nothing.
    before = Event.objects.count()
    assert claims.apply(user, first, ISSUER, RULES) == []
    assert Event.objects.count() == before

    assert claims.apply(user, {"sub": "s-1", "groups": ["team-vision"]}, ISSUER, RULES) == [
        "left research",
        "is no longer an admin",
    ]
    assert teams_of(user) == {"vision": True, "ops": False}
    assert not user.is_staff
    assert ProviderAccount.objects.get(user=user).groups == ["team-vision"]


@pytest.mark.django_db
def test_without_an_admin_group_the_role_is_left_as_set_here(people):
    rules = claims.Rules("groups", RULES.team_pattern, admin_group="")
    claims.apply(people.admin, {"sub": "a", "groups": []}, ISSUER, rules)
    people.admin.refresh_from_db()
    assert people.admin.is_staff


@pytest.mark.django_db
def test_the_console_cannot_remove_a_membership_from_the_provider(people):
    user = get_user_model().objects.create_user("dana")
    claims.apply(user, {"sub": "s", "groups": ["team-nlp"]}, ISSUER, RULES)
    with pytest.raises(Conflict, match="remove them from the group there"):
        accounts.remove_member(people.admin, Team.objects.get(name="nlp"), user)
    assert teams_of(user) == {"nlp": True}


class FakeRequest:
    """What the backend keeps a refusal's reason on."""


@pytest.fixture
def backend(settings):
    settings.QP_OIDC_ISSUER, settings.QP_OIDC_CLIENT_ID = ISSUER, "portal"
    settings.QP_OIDC_TEAM_PATTERN = r"team-(?P<team>[\w-]+)"
    found = oidc.ProviderBackend()
    found.request = FakeRequest()
    return found


@pytest.mark.django_db
def test_a_local_account_is_not_taken_over_by_a_name(backend):
    get_user_model().objects.create_user("carol", email="carol@example.org", password="x" * 12)
    with pytest.raises(oidc.Refused, match="already exists here and is not linked"):
        backend.create_user({"sub": "s-9", "preferred_username": "carol", "email": "c@evil.org"})
    unverified = {"sub": "s-9", "preferred_username": "carol", "email": "carol@example.org"}
    with pytest.raises(oidc.Refused):
        backend.create_user(unverified)  # the address matches but nobody verified it
    assert not ProviderAccount.objects.exists()


@pytest.mark.django_db
def test_a_local_account_is_linked_by_its_verified_address_once(backend):
    carol = get_user_model().objects.create_user("carol", email="Carol@Example.org")
    found = {
        "sub": "s-9",
        "preferred_username": "carol",
        "email": "carol@example.org",
        "email_verified": True,
        "groups": ["team-vision"],
    }
    assert backend.create_user(found) == carol
    assert ProviderAccount.objects.get(user=carol).subject == "s-9"
    assert list(backend.filter_users_by_claims({"sub": "s-9"})) == [carol]
    other = {**found, "sub": "s-10"}  # another person at the provider with the same address
    with pytest.raises(oidc.Refused):
        backend.create_user(other)


@pytest.mark.django_db
def test_a_deactivated_account_stays_out(backend):
    dana = get_user_model().objects.create_user("dana", is_active=False)
    with pytest.raises(oidc.Refused, match="deactivated"):
        backend.update_user(dana, {"sub": "s"})


def test_an_id_token_for_another_client_or_issuer_is_refused(backend, monkeypatch):
    from mozilla_django_oidc.auth import OIDCAuthenticationBackend

    backend.id_claims = {}
    for payload, words in [
        ({"iss": "https://evil.example", "aud": "portal"}, "another provider"),
        ({"iss": ISSUER, "aud": ["other-app"]}, "another application"),
    ]:
        monkeypatch.setattr(OIDCAuthenticationBackend, "verify_token", lambda *a, p=payload, **k: p)
        with pytest.raises(oidc.Refused, match=words):
            backend.verify_token("token", nonce="n")


# Through the pages.


@pytest.mark.django_db
def test_password_sign_in_and_out_and_a_wrong_password_are_audited(client, people):
    people.alice.set_password("a-long-password-1")
    people.alice.save()
    tried = {"username": "alice", "password": "not-her-password"}
    assert client.post(reverse("login"), tried).status_code == 200
    refused = Event.objects.get(kind=EventKind.SIGN_IN_REFUSED)
    assert refused.detail["username"] == "alice"
    assert "not-her-password" not in str(refused.detail)  # the password tried is never written
    client.post(reverse("login"), {"username": "alice", "password": "a-long-password-1"})
    signed_in = Event.objects.get(kind=EventKind.SIGNED_IN)
    assert signed_in.actor == people.alice
    assert signed_in.detail == {"method": "password", "address": "127.0.0.1"}
    client.post(reverse("logout"))
    assert Event.objects.filter(kind=EventKind.SIGNED_OUT, actor=people.alice).exists()


@pytest.mark.django_db
def test_with_local_sign_in_off_passwords_are_refused(client, people, settings):
    settings.QP_LOCAL_LOGIN = False
    settings.QP_OIDC_ISSUER, settings.QP_OIDC_CLIENT_ID = ISSUER, "portal"
    people.alice.set_password("a-long-password-1")
    people.alice.save()
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with single sign-on" in page
    assert 'name="password"' not in page
    refused = client.post(reverse("login"), {"username": "alice", "password": "a-long-password-1"})
    assert refused.status_code == 403
    assert "_auth_user_id" not in client.session
    said = refused.content.decode()
    assert "switched off here: use single sign-on." in said
    assert "sign-on.." not in said


@pytest.mark.django_db
def test_without_a_provider_there_is_no_single_sign_on(client):
    assert "Sign in with" not in client.get(reverse("login")).content.decode()
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert client.get(reverse("oidc_authentication_callback")).status_code == 404


@pytest.mark.django_db
def test_a_provider_that_does_not_answer_is_said_so(client, settings):
    settings.QP_OIDC_ISSUER, settings.QP_OIDC_CLIENT_ID = "http://127.0.0.1:9/idp", "portal"
    oidc.forget_discovery()
    answer = client.get(reverse("oidc_authentication_init"))
    assert answer.status_code == 502
    assert "did not answer" in answer.content.decode()
    assert Event.objects.filter(kind=EventKind.SIGN_IN_REFUSED).exists()


def test_switching_local_sign_in_off_takes_passwords_out_of_every_door():
    """Not only the sign-in page: Django's admin and any other authenticate() call too."""
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(' '.join(settings.AUTHENTICATION_BACKENDS))"
    )
    env = {**os.environ, "QP_LOCAL_LOGIN": "false"}
    env.setdefault("DJANGO_SETTINGS_MODULE", "quotaportal.settings")
    shown = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "django.contrib.auth.backends.ModelBackend" not in shown
    assert "quotaportal.identity.oidc.ProviderBackend" in shown
