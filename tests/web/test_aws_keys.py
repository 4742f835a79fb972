"""The AWS access keys page: a user makes and revokes their own keys; the secret shows once."""

from __future__ import annotations

from django.test import Client

from quotaportal.awsbatch.keys import active_key
from quotaportal.awsbatch.models import AccessKey


def test_a_user_creates_a_key_sees_the_secret_once_and_revokes_it(people, client):
    client.force_login(people.alice)
    created = client.post("/account/aws-keys/")
    assert created.status_code == 200
    key = AccessKey.objects.get(user=people.alice)
    page = created.content.decode()
    assert f"export AWS_SECRET_ACCESS_KEY={key.secret_access_key}" in page
    assert "no-store" in created["Cache-Control"]
    listing = client.get("/account/aws-keys/").content.decode()
    assert key.access_key_id in listing
    assert key.secret_access_key not in listing
    assert active_key(key.access_key_id) == key

    client.post(f"/account/aws-keys/{key.pk}/revoke/")
    assert active_key(key.access_key_id) is None
    assert "revoked" in client.get("/account/aws-keys/").content.decode()


def test_two_active_keys_at_most_and_only_ones_own_can_be_revoked(people, client):
    client.force_login(people.alice)
    client.post("/account/aws-keys/")
    client.post("/account/aws-keys/")
    third = client.post("/account/aws-keys/", follow=True).content.decode()
    assert "already has 2 active access keys; revoke one first" in third
    assert AccessKey.objects.filter(user=people.alice).count() == 2
    client.force_login(people.bob)
    key = AccessKey.objects.filter(user=people.alice).first()
    assert client.post(f"/account/aws-keys/{key.pk}/revoke/").status_code == 404
    assert active_key(key.access_key_id) is not None


def test_the_keys_page_needs_a_sign_in_and_a_csrf_token(people):
    anonymous = Client()
    assert anonymous.post("/account/aws-keys/").status_code == 302
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(people.alice)
    assert forged.post("/account/aws-keys/").status_code == 403
    assert not AccessKey.objects.exists()
