"""The admin console through Django's test client: permissions on every view, each form with
good and bad input, refusals with reasons, invite links and tokens shown once, the audit log."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from quotaportal.quotas.models import (
    CapacityUnit,
    Event,
    JobQueue,
    Membership,
    Reservation,
    SchedulingPolicy,
    ServiceEnvironment,
    Team,
)
from quotaportal.quotas.services import tokens
from tests.builders import submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, people):
    client.force_login(people.admin)
    return client


@pytest.fixture
def scientist_client(client, people):
    client.force_login(people.alice)
    return client


def console_urls(fleet) -> list[str]:
    reservation = Reservation.objects.create(
        environment=fleet.env,
        name="plan",
        capacity_unit=CapacityUnit.objects.get(name="a100"),
        instances=1,
        starts_at=timezone.now() + timedelta(hours=1),
        ends_at=timezone.now() + timedelta(hours=2),
    )
    team = Team.objects.get(name="vision")
    user = get_user_model().objects.get(username="alice")
    unit = CapacityUnit.objects.get(name="a100")
    policy = SchedulingPolicy.objects.get()
    return [
        reverse("manage"),
        reverse("manage-teams"),
        reverse("manage-team", args=[team.pk]),
        reverse("manage-team-delete", args=[team.pk]),
        reverse("manage-member-remove", args=[team.pk, user.pk]),
        reverse("manage-users"),
        reverse("manage-user", args=[user.pk]),
        reverse("manage-units"),
        reverse("manage-unit", args=[unit.pk]),
        reverse("manage-unit-delete", args=[unit.pk]),
        reverse("manage-environments"),
        reverse("manage-environment", args=[fleet.env.pk]),
        reverse("manage-environment-delete", args=[fleet.env.pk]),
        reverse("manage-reservation-cancel", args=[reservation.pk]),
        reverse("manage-policies"),
        reverse("manage-policy-delete", args=[policy.pk]),
        reverse("manage-queues"),
        reverse("manage-queue", args=[fleet.queue.pk]),
        reverse("manage-queue-delete", args=[fleet.queue.pk]),
    ]


def test_a_scientist_gets_403_on_every_admin_view_and_changes_nothing(scientist_client, fleet):
    before = Event.objects.count()
    for url in console_urls(fleet):
        assert scientist_client.get(url).status_code in (403, 405), url
        assert scientist_client.post(url, {"name": "x", "action": "token"}).status_code == 403, url
    assert Event.objects.count() == before
    assert Reservation.objects.count() == 1


def test_signed_out_visitors_are_sent_to_sign_in(client, fleet):
    for url in console_urls(fleet):
        answer = client.post(url)
        assert answer.status_code == 302, url
        assert "/login/" in answer["Location"], url


def test_every_console_page_renders_for_an_admin(admin_client, fleet):
    for url in console_urls(fleet):
        if "delete" in url or "remove" in url or "cancel" in url:
            continue
        answer = admin_client.get(url)
        assert answer.status_code == 200, url
        assert b"csrfmiddlewaretoken" in answer.content or url == reverse("manage"), url


def test_teams_create_rename_members_and_delete_refused_with_a_reason(admin_client, fleet, people):
    answer = admin_client.post(reverse("manage-teams"), {"name": "has space"})
    assert answer.status_code == 400
    assert b"no spaces" in answer.content
    answer = admin_client.post(reverse("manage-teams"), {"name": "robotics"})
    team = Team.objects.get(name="robotics")
    assert answer["Location"] == reverse("manage-team", args=[team.pk])
    page = reverse("manage-team", args=[team.pk])
    assert admin_client.post(page, {"form": "rename", "rename-name": "vision"}).status_code == 400
    admin_client.post(page, {"form": "rename", "rename-name": "robots"})
    assert Team.objects.filter(name="robots").exists()
    admin_client.post(page, {"form": "member", "member-user": "bob", "member-role": "admin"})
    assert Membership.objects.get(team=team, user=people.bob).is_admin
    answer = admin_client.post(page, {"form": "member", "member-user": "nobody"})
    assert answer.status_code == 400
    admin_client.post(reverse("manage-member-remove", args=[team.pk, people.bob.pk]))
    assert not Membership.objects.filter(team=team, user=people.bob).exists()
    # vision owns a share with an active job: refused, with the reason shown.
    submit(people.alice, fleet, name="busy")
    vision = Team.objects.get(name="vision")
    answer = admin_client.post(reverse("manage-team-delete", args=[vision.pk]), follow=True)
    assert b"1 active job" in answer.content
    assert Team.objects.filter(pk=vision.pk).exists()
    admin_client.post(reverse("manage-team-delete", args=[team.pk]))
    assert not Team.objects.filter(pk=team.pk).exists()
    actions = set(
        Event.objects.filter(detail__resource__in=["team", "member"]).values_list(
            "detail__action", flat=True
        )
    )
    assert {"created", "renamed", "added", "removed", "deleted"} <= actions


def test_a_new_user_gets_an_invite_link_that_works_once(admin_client, client, people):
    answer = admin_client.post(
        reverse("manage-users"), {"username": "carol", "teams": ["vision"], "email": ""}
    )
    assert answer.status_code == 200
    assert answer["Cache-Control"].startswith("max-age=0")
    carol = get_user_model().objects.get(username="carol")
    assert not carol.has_usable_password()
    assert list(carol.teams.values_list("name", flat=True)) == ["vision"]
    link = answer.context["invite"]
    shown = answer.context["token"]
    assert shown in answer.content.decode()
    assert tokens.find(shown).user == carol
    bad = admin_client.post(reverse("manage-users"), {"username": "bad name"})
    assert bad.status_code == 400
    assert b"no spaces" in bad.content
    admin_client.logout()  # the same client follows the link, signed out
    # Django's confirm view moves the token into the session, then shows the form.
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200
    assert form_page.context["validlink"]
    done = client.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": "a long passphrase 42", "new_password2": "a long passphrase 42"},
    )
    assert done.status_code == 302
    signed_in = client.post(
        reverse("login"), {"username": "carol", "password": "a long passphrase 42"}
    )
    assert signed_in.status_code == 302, "the chosen password signs in"
    client.logout()
    assert not client.get(link, follow=True).context["validlink"], "a used link is dead"


def test_reset_password_token_and_deactivate(admin_client, client, people):
    page = reverse("manage-user", args=[people.alice.pk])
    old_token = people.tokens["alice"]
    legacy = Token.objects.create(user=people.alice).key
    answer = admin_client.post(page, {"action": "token"})
    new_token = answer.context["token"]
    assert new_token != old_token
    assert new_token in answer.content.decode()
    assert tokens.find(new_token).name == "made by ada"
    for key in (old_token, legacy, new_token):  # another token, the others kept
        assert client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    answer = admin_client.post(page, {"action": "invite"})
    assert "/invite/" in answer.context["invite"]
    people.alice.refresh_from_db()
    assert not people.alice.has_usable_password()
    admin_client.post(page, {"action": "deactivate"})
    assert client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {new_token}").status_code == 401
    admin_client.post(page, {"action": "reactivate"})
    admin_client.post(page, {"action": "revoke-token"})
    for key in (old_token, legacy, new_token):  # revoking revokes every one
        assert client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
    own = admin_client.post(
        reverse("manage-user", args=[people.admin.pk]), {"action": "deactivate"}, follow=True
    )
    assert b"cannot deactivate your own account" in own.content


def test_units_environments_reservations_policies_and_queues(admin_client, fleet):
    answer = admin_client.post(reverse("manage-units"), {"name": "h100", "gpus_per_unit": 99})
    assert answer.status_code == 400
    assert b"less than or equal to 64" in answer.content
    admin_client.post(reverse("manage-units"), {"name": "h100", "gpus_per_unit": 8})
    h100 = CapacityUnit.objects.get(name="h100")
    admin_client.post(
        reverse("manage-unit", args=[h100.pk]), {"gpus_per_unit": 4, "description": "SXM"}
    )
    assert CapacityUnit.objects.get(name="h100").description == "SXM"

    envs = reverse("manage-environments")
    answer = admin_client.post(envs, {"name": "lab", "backend": "LOCAL", "capacity_limits": "h100"})
    assert answer.status_code == 400
    assert b"unit=count" in answer.content
    answer = admin_client.post(
        envs, {"name": "lab", "backend": "LOCAL", "capacity_limits": "b200=1", "state": "ENABLED"}
    )
    assert answer.status_code == 400
    assert b"nknown capacity unit(s): b200" in answer.content
    admin_client.post(
        envs, {"name": "lab", "backend": "LOCAL", "capacity_limits": "h100=2", "state": "ENABLED"}
    )
    lab = ServiceEnvironment.objects.get(name="lab")
    page = reverse("manage-environment", args=[lab.pk])
    admin_client.post(
        page, {"form": "edit", "edit-capacity_limits": "h100=3", "edit-state": "DISABLED"}
    )
    lab.refresh_from_db()
    assert lab.state == "DISABLED"
    now = timezone.now()
    window = {
        "form": "reserve",
        "reserve-name": "plan-a",
        "reserve-capacity_unit": "h100",
        "reserve-instances": 2,
        "reserve-starts_at": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
        "reserve-ends_at": (now + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M"),
    }
    answer = admin_client.post(page, window)
    assert answer.status_code == 400
    assert b"The end must come after the start" in answer.content
    window["reserve-ends_at"] = (now + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")
    admin_client.post(page, window)
    reservation = Reservation.objects.get(name="plan-a")
    shown = admin_client.get(page).content.decode()
    assert "+2 h100 (plan-a starts)" in shown
    assert "upcoming" in shown
    admin_client.post(reverse("manage-reservation-cancel", args=[reservation.pk]))
    assert not Reservation.objects.filter(pk=reservation.pk).exists()

    admin_client.post(reverse("manage-policies"), {"name": "p2"})
    answer = admin_client.post(reverse("manage-policies"), {"name": "p2"})
    assert answer.status_code == 400
    assert b"already exists" in answer.content
    queue_fields = {
        "name": "lab-queue",
        "service_environment": "lab",
        "scheduling_policy": "p2",
        "priority": 5,
        "ordering": "BEST_EFFORT",
        "preemption_grace_seconds": 10,
        "state": "ENABLED",
    }
    assert (
        admin_client.post(reverse("manage-queues"), {**queue_fields, "priority": 5000}).status_code
        == 400
    )
    admin_client.post(reverse("manage-queues"), queue_fields)
    queue = JobQueue.objects.get(name="lab-queue")
    assert (queue.priority, queue.ordering, queue.preemption_grace_seconds) == (
        5,
        "BEST_EFFORT",
        10,
    )
    admin_client.post(
        reverse("manage-queue", args=[queue.pk]),
        {**queue_fields, "priority": 7, "ordering": "STRICT"},
    )
    queue.refresh_from_db()
    assert (queue.priority, queue.ordering) == (7, "STRICT")
    # Deletes are refused while something depends on them, each with its reason.
    refused = admin_client.post(reverse("manage-queue-delete", args=[fleet.queue.pk]), follow=True)
    assert b"still has quota shares" in refused.content
    refused = admin_client.post(reverse("manage-environment-delete", args=[lab.pk]), follow=True)
    assert b"still in use" in refused.content
    admin_client.post(reverse("manage-queue-delete", args=[queue.pk]))
    admin_client.post(reverse("manage-environment-delete", args=[lab.pk]))
    admin_client.post(
        reverse("manage-policy-delete", args=[SchedulingPolicy.objects.get(name="p2").pk])
    )
    assert not JobQueue.objects.filter(name="lab-queue").exists()
    assert not ServiceEnvironment.objects.filter(name="lab").exists()
    assert not SchedulingPolicy.objects.filter(name="p2").exists()


def test_limits_above_capacity_are_warned_about_on_the_queue_and_environment(admin_client, fleet):
    # fleet: 4 a100; shares vision 2 and nlp 2. Lower the capacity to 3.
    admin_client.post(
        reverse("manage-environment", args=[fleet.env.pk]),
        {"form": "edit", "edit-capacity_limits": "a100=3", "edit-state": "ENABLED"},
    )
    for url in (
        reverse("manage-queue", args=[fleet.queue.pk]),
        reverse("manage-environment", args=[fleet.env.pk]),
    ):
        assert "limits on a100 total 4 on 3 instance" in admin_client.get(url).content.decode()


def test_the_dashboard_shows_the_next_capacity_changes(admin_client, people, fleet):
    from quotaportal.quotas.services import reservations

    now = timezone.now()
    reservations.create_reservation(
        people.admin,
        fleet.env,
        name="h2-plan",
        capacity_unit="a100",
        instances=4,
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(hours=9),
    )
    page = admin_client.get(reverse("dashboard")).content.decode()
    assert "+4 a100 (h2-plan starts)" in page
    assert "-4 a100 (h2-plan ends)" in page


def test_a_long_bad_capacity_value_is_not_echoed_in_full():
    from django import forms as django_forms

    from quotaportal.web.forms.common import parse_unit_counts

    with pytest.raises(django_forms.ValidationError) as err:
        parse_unit_counts("x" * 1000)
    message = err.value.messages[0]
    assert "1,000 characters" in message
    assert "x" * 100 not in message
    assert "write unit=count pairs" in message


@pytest.mark.django_db
def test_a_bad_name_states_the_rule_not_the_fields_help():
    from quotaportal.web.forms.manage import EnvironmentForm, ReservationForm, TeamForm

    reservation = ReservationForm({"name": "bad name!"})
    reservation.is_valid()
    assert reservation.errors["name"] == [
        "Use 1 to 128 letters, digits, - or _ (no spaces or other signs)."
    ]
    environment = EnvironmentForm({"name": "-1"})
    environment.is_valid()
    assert "name" not in environment.errors, "the services take it: so does the form"
    team = TeamForm({"name": "x" * 65})
    team.is_valid()
    assert "1 to 64 letters" in team.errors["name"][0]


def test_an_admin_sets_an_existing_users_email_and_a_bad_one_is_refused_beside_it(
    admin_client, people
):
    page = reverse("manage-user", args=[people.alice.pk])
    answer = admin_client.post(page, {"action": "email", "email": "alice@example.org"})
    assert answer.status_code == 302
    people.alice.refresh_from_db()
    assert people.alice.email == "alice@example.org"
    assert 'value="alice@example.org"' in admin_client.get(page).content.decode()
    audit = Event.objects.filter(kind="resource_changed").latest("id")
    assert audit.detail["email"] == "alice@example.org"
    for bad, says in (("not an address", "is not an e-mail address"), ("x" * 300, "254")):
        refused = admin_client.post(page, {"action": "email", "email": bad})
        assert refused.status_code == 400
        assert says in refused.content.decode()
    people.alice.refresh_from_db()
    assert people.alice.email == "alice@example.org", "nothing changed by a refusal"
    admin_client.post(page, {"action": "email", "email": ""})  # cleared
    people.alice.refresh_from_db()
    assert people.alice.email == ""


def test_a_scientist_cannot_set_anyones_email(scientist_client, people):
    page = reverse("manage-user", args=[people.bob.pk])
    answer = scientist_client.post(page, {"action": "email", "email": "evil@example.org"})
    assert answer.status_code == 403
    people.bob.refresh_from_db()
    assert people.bob.email == ""
