"""Browser tests of the pages as a new user meets them: errors in place, a live job page,
preemptions that name both sides, and every page at phone width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def submit_as(user, queue, name, priority=0, quantity=2):
    return services.submit_job(
        user,
        job_queue=queue,
        quota_share="vision",
        capacity_unit="a100",
        name=name,
        quantity=quantity,
        scheduling_priority=priority,
    )


@pytest.mark.parametrize("value", ["", "12000"])
def test_a_bad_priority_shows_its_error_next_to_the_field(
    browser, live_server, small_fleet, people, value
):
    job = submit_as(people.alice, small_fleet, "waiting")
    page = sign_in(browser, live_server, "alice")
    for where in (f"/jobs/{job.pk}/", "/jobs/"):
        page.goto(live_server.url + where)
        box = page.get_by_label("Priority")
        box.evaluate("(input) => input.form.noValidate = true")
        box.fill(value)
        page.get_by_role("button", name="Set").click()
        expect(page.get_by_role("alert")).to_be_visible()
        expect(page.get_by_role("navigation", name="Main")).to_be_visible()
        expect(page.locator("h1")).to_be_visible()
        page.screenshot(path=f"/tmp/ux/prio-{value or 'empty'}-{where.count('/')}.png")
    assert Job.objects.get(pk=job.pk).scheduling_priority == 0
