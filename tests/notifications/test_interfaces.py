"""Webhooks through REST and the console (admins only, bad input refused with what to fix),
and a person's e-mail choices on their account page."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from quotaportal.notifications.models import Delivery, EmailPreference, Webhook
from quotaportal.notifications.tasks import deliver_round
from quotaportal.quotas.models import Event
from tests.builders import submit

SECRET = "0123456789abcdef"


def api(people, name: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens[name]}")
    return client


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_an_admin_adds_a_webhook_over_rest_and_reads_its_deliveries(people, fleet, listener):
    created = api(people, "ada").post(
        "/api/v1/webhooks/",
        {
            "name": "ops",
            "url": listener.url,
            "secret": SECRET,
            "detail_types": ["Batch Service Job State Change"],
            "job_queues": ["gpu"],
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert "secret" not in body, "the secret is never returned"
    assert body["job_queues"] == ["gpu"]
    assert body["format"] == "eventbridge"
    submit(people.alice, fleet)
    deliver_round()
    log = api(people, "ada").get(f"/api/v1/webhooks/{body['id']}/deliveries/").json()
    assert [d["status"] for d in log] == ["DELIVERED"]
    assert log[0]["response_status"] == 204
    assert '"detail-type":"Batch Service Job State Change"' in log[0]["body"]
    assert Event.objects.filter(kind="resource_changed", detail__resource="webhook").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("url", "ftp://example.org/x", "an http:// or https:// URL (not"),
        ("url", "http://" + "a" * 3000, "Ensure this field has no more than"),
        ("secret", "short", "Ensure this field has at least 16 characters"),
        ("detail_types", ["Batch Job State Change"], "is not a valid choice"),
        ("job_queues", ["nope"], "does not exist"),
        ("format", "xml", "is not a valid choice"),
    ],
)
def test_bad_webhook_fields_get_a_400_saying_what_to_fix(people, fleet, field, value, says):
    fields = {"name": "ops", "url": "https://hooks.example.org/x", "secret": SECRET, field: value}
    answer = api(people, "ada").post("/api/v1/webhooks/", fields, format="json")
    assert answer.status_code == 400
    assert says in answer.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.django_db
def test_scientists_can_neither_see_nor_change_webhooks(people, fleet):
    hook = (
        api(people, "ada")
        .post(
            "/api/v1/webhooks/",
            {"name": "ops", "url": "https://hooks.example.org/x", "secret": SECRET},
            format="json",
        )
        .json()
    )
    alice = api(people, "alice")
    assert alice.get("/api/v1/webhooks/").status_code == 403
    assert alice.get(f"/api/v1/webhooks/{hook['id']}/deliveries/").status_code == 403
    assert alice.delete(f"/api/v1/webhooks/{hook['id']}/").status_code == 403
    assert browser(people.alice).get("/manage/webhooks/").status_code == 403
    assert Webhook.objects.count() == 1


@pytest.mark.django_db
def test_the_console_creates_edits_and_shows_deliveries(people, fleet, listener):
    admin = browser(people.admin)
    made = admin.post(
        "/manage/webhooks/",
        {"name": "ops", "url": listener.url, "secret": SECRET, "format": "eventbridge"},
    )
    hook = Webhook.objects.get()
    assert made.status_code == 302
    assert made["Location"] == f"/manage/webhooks/{hook.pk}/"
    submit(people.alice, fleet, name="shown")
    deliver_round()
    page = admin.get(f"/manage/webhooks/{hook.pk}/").content.decode()
    assert 'data-status="DELIVERED"' in page
    assert "HTTP 204" in page
    # Each delivery names its job and the status it carried, not just "job".
    row = page[page.index('data-status="DELIVERED"') :].split("</tr>")[0]
    assert ">shown</a> → RUNNABLE" in row
    # Saving without a new secret keeps the old one; pausing stops deliveries.
    saved = admin.post(
        f"/manage/webhooks/{hook.pk}/",
        {"name": "ops", "url": listener.url, "secret": "", "format": "slack"},
    )
    assert saved.status_code == 302
    hook.refresh_from_db()
    assert hook.secret == SECRET
    assert hook.format == "slack"
    assert hook.enabled is False
    submit(people.alice, fleet, name="not-sent")
    deliver_round()
    assert Delivery.objects.count() == 1


@pytest.mark.django_db
def test_the_console_refuses_a_bad_url_next_to_the_field(people, fleet):
    answer = browser(people.admin).post(
        "/manage/webhooks/",
        {"name": "ops", "url": "javascript:alert(1)", "secret": SECRET, "format": "eventbridge"},
    )
    assert answer.status_code == 400
    assert "an http:// or https:// URL (not" in answer.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.django_db
def test_a_person_chooses_email_on_their_account_page(people):
    page = browser(people.alice)
    refused = page.post("/account/notifications/", {"on_failed": "on"})
    assert refused.status_code == 400
    assert "no e-mail address" in refused.content.decode()
    people.alice.email = "alice@example.org"
    people.alice.save()
    assert page.post("/account/notifications/", {"on_failed": "on"}).status_code == 302
    choice = EmailPreference.objects.get(user=people.alice)
    assert (choice.on_failed, choice.on_preempted, choice.on_succeeded) == (True, False, False)
    assert "alice@example.org" in page.get("/account/notifications/").content.decode()
