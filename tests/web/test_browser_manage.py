"""Every admin-console form in a browser: good input saves, bad input is shown next to its
field and saves nothing, a scientist is refused. Screenshots: test-artifacts/manage-*.png."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from quotaportal.quotas.models import (
    CapacityUnit,
    JobQueue,
    Membership,
    Reservation,
    SchedulingPolicy,
    ServiceEnvironment,
    Team,
)
from tests.web.builders import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def at(hours: float) -> str:
    return (timezone.now() + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


@dataclass
class FormCase:
    name: str
    path: str  # {env}, {team}, {queue} are filled in
    bad: dict  # label -> value (select_option for selects, fill for the rest)
    bad_says: str
    good: dict
    button: str
    saved: object  # () -> bool

    def url(self, live_server, queue) -> str:
        team = Team.objects.get(name="vision")
        path = self.path.format(env=queue.service_environment_id, team=team.pk, queue=queue.pk)
        return f"{live_server.url}{path}"


CASES = [
    FormCase(
        "team",
        "/manage/teams/",
        {"Name": "two words"},
        "no spaces",
        {"Name": "robotics"},
        "Create team",
        lambda: Team.objects.filter(name="robotics").exists(),
    ),
    FormCase(
        "member",
        "/manage/teams/{team}/",
        {"Role": "admin"},
        "This field is required",
        {"User": "bob", "Role": "admin"},
        "Save membership",
        lambda: Membership.objects.filter(team__name="vision", user__username="bob").exists(),
    ),
    FormCase(
        "user",
        "/manage/users/",
        {"Username": "carol smith"},
        "no spaces",
        {"Username": "carol"},
        "Create user",
        lambda: get_user_model().objects.filter(username="carol").exists(),
    ),
    FormCase(
        "unit",
        "/manage/units/",
        {"Name": "h100", "Gpus per unit": "0"},
        "greater than or equal to 1",
        {"Name": "h100", "Gpus per unit": "8"},
        "Create unit",
        lambda: CapacityUnit.objects.filter(name="h100").exists(),
    ),
    FormCase(
        "environment",
        "/manage/environments/",
        {"Name": "lab", "Capacity": "a100 four"},
        "unit=count",
        {"Name": "lab", "Backend": "LOCAL", "Capacity": "a100=2"},
        "Create environment",
        lambda: ServiceEnvironment.objects.filter(name="lab").exists(),
    ),
    FormCase(
        "reservation",
        "/manage/environments/{env}/",
        {
            "Name": "plan-a",
            "Capacity unit": "a100",
            "Instances": "2",
            "Starts (UTC)": at(2),
            "Ends (UTC)": at(1),
        },
        "The end must come after the start",
        {
            "Name": "plan-a",
            "Capacity unit": "a100",
            "Instances": "2",
            "Starts (UTC)": at(1),
            "Ends (UTC)": at(3),
        },
        "Reserve",
        lambda: Reservation.objects.filter(name="plan-a").exists(),
    ),
    FormCase(
        "policy",
        "/manage/policies/",
        {"Name": "fifo"},
        "already exists",
        {"Name": "fair"},
        "Create policy",
        lambda: SchedulingPolicy.objects.filter(name="fair").exists(),
    ),
    FormCase(
        "queue",
        "/manage/queues/",
        {
            "Name": "batch",
            "Service environment": "sim",
            "Scheduling policy": "fifo",
            "Priority": "5000",
        },
        "less than or equal to 1000",
        {
            "Name": "batch",
            "Service environment": "sim",
            "Scheduling policy": "fifo",
            "Priority": "3",
        },
        "Create queue",
        lambda: JobQueue.objects.filter(name="batch", priority=3).exists(),
    ),
    FormCase(
        "queue-settings",
        "/manage/queues/{queue}/",
        {"Preemption grace (s)": "-5"},
        "greater than or equal to 0",
        {"Preemption grace (s)": "90", "Ordering": "BEST_EFFORT"},
        "Save settings",
        lambda: JobQueue.objects.filter(
            name="gpu", preemption_grace_seconds=90, ordering="BEST_EFFORT"
        ).exists(),
    ),
]


def fill(page, values: dict) -> None:
    for label, value in values.items():
        field = page.get_by_label(label, exact=True)
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_an_admin_form_refuses_bad_input_in_place_then_saves(
    browser, live_server, small_fleet, case
):
    page = sign_in(browser, live_server, "ada")
    page.goto(case.url(live_server, small_fleet))
    fill(page, case.bad)
    page.get_by_role("button", name=case.button, exact=True).click()
    expect(page.get_by_role("alert").first).to_contain_text(case.bad_says)
    assert not case.saved()
    shot(page, f"manage-{case.name}-invalid")
    page.goto(case.url(live_server, small_fleet))
    fill(page, case.good)
    page.get_by_role("button", name=case.button, exact=True).click()
    expect(page.get_by_role("status")).to_be_visible()
    assert case.saved()
    shot(page, f"manage-{case.name}-saved")
    page.context.close()


def test_a_scientist_is_refused_every_console_page(browser, live_server, small_fleet):
    page = sign_in(browser, live_server, "alice")
    expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    for case in CASES:
        answer = page.goto(case.url(live_server, small_fleet))
        assert answer.status == 403, case.path
    shot(page, "manage-forbidden")
    page.context.close()


def test_the_environment_page_at_phone_width(browser, live_server, small_fleet, people):
    from quotaportal.quotas.services import reservations

    env = small_fleet.service_environment
    now = timezone.now()
    reservations.create_reservation(
        people.admin,
        env,
        name="training-plan-h2",
        capacity_unit="a100",
        instances=4,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=2),
    )
    page = sign_in(browser, live_server, "ada")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/manage/environments/{env.pk}/")
    expect(page.get_by_test_id("upcoming")).to_contain_text("training-plan-h2 ends")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"
    shot(page, "manage-environment-phone")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="End now").click()
    expect(page.get_by_role("status")).to_contain_text("Cancelled reservation")
    assert Reservation.objects.get().ends_at <= timezone.now()
    page.context.close()
