"""Browser tests of the pages as a new user meets them: errors in place, a live job page,
preemptions that name both sides, and every page at phone width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick_waiting
from tests.web.builders import PASSWORD, SHOTS, shot, sign_in

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


@pytest.mark.parametrize("debug", [False, True], ids=["production", "demo"])
@pytest.mark.parametrize("value", ["", "12000"])
def test_a_bad_priority_shows_its_error_next_to_the_field(
    browser, live_server, small_fleet, people, value, debug, settings
):
    # The demo runs with DEBUG on, where django-htmx's debug script replaced the whole page
    # with the bare answer of any 400.
    settings.DEBUG = debug
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


def test_a_priority_raise_updates_the_whole_job_page_and_both_sides_name_each_other(
    browser, live_server, small_fleet, people, scheduler
):
    """vision: 2 instances, in-share preemption. `running` holds both; raising `waiting`
    above it preempts `running`, and each job's page names the other."""
    running = submit_as(people.alice, small_fleet, "running", priority=1)
    page = sign_in(browser, live_server, "alice")
    page.goto(f"{live_server.url}/jobs/{running.pk}/")
    expect(page.get_by_test_id("status")).to_have_text("RUNNING", timeout=15_000)
    waiting = submit_as(people.alice, small_fleet, "waiting", priority=0)
    page.goto(f"{live_server.url}/jobs/{waiting.pk}/")
    expect(page.get_by_test_id("pending")).to_be_visible(timeout=10_000)
    expect(page.locator("#attempts")).to_contain_text("Not started yet")

    page.get_by_label("Priority").fill("5")
    page.get_by_role("button", name="Set").click()
    expect(page.get_by_role("status").filter(has_text="Priority set to 5")).to_be_visible()
    # Never reloaded: status, timeline and attempts move on together.
    expect(page.get_by_test_id("status")).to_have_text("RUNNING", timeout=15_000)
    expect(page.locator("#timeline")).to_contain_text("Priority changed from 0 to 5")
    expect(page.locator("#timeline")).to_contain_text("after preempting lower-priority running")
    expect(page.locator("#attempts")).not_to_contain_text("Not started yet")
    page.get_by_role("link", name="running").first.click()
    expect(page.locator("#timeline")).to_contain_text(
        "Preempted by higher-priority waiting (vision)"
    )
    shot(page, "preempted-job")
    page.goto(f"{live_server.url}/")
    expect(page.locator("#preemptions")).to_contain_text("Preempted by higher-priority waiting")
    shot(page, "dashboard-preemption")
    page.locator("[data-testid=history-chart]").screenshot(path=str(SHOTS / "history-chart.png"))


PAGES = ["/", "/jobs/", "/jobs/new/", "/shares/", "/shares/new/", "/hosts/", "/audit/", "/what-if/"]


def test_no_page_is_wider_than_a_phone(browser, live_server, small_fleet, people, scheduler):
    job = submit_as(people.alice, small_fleet, "a-job-with-a-rather-long-name-to-wrap", 1)
    # Dispatched before the second arrives, so the second must preempt it (the loop alone
    # might see both at once and start the second first, preempting nothing). It waits for a
    # tick of the loop in progress, which may have begun before the first job committed.
    run_tick_waiting(small_fleet.pk)
    submit_as(people.alice, small_fleet, "second", priority=5)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    expect(page.locator("#preemptions")).to_contain_text("Preempted by", timeout=15_000)
    for path in [*PAGES, f"/jobs/{job.pk}/"]:
        page.goto(live_server.url + path)
        wide = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert not wide, f"{path} is wider than 390 px"
    shot(page, "job-page-phone")


@pytest.mark.parametrize("width", [1280, 390])
def test_pressing_enter_on_a_bad_priority_shows_the_error_and_keeps_the_page(
    browser, live_server, small_fleet, people, width
):
    """A keyboard user's Enter, not only a click: the error goes next to the box, and the page
    around it (navigation, heading, the job's details) stays."""
    job = submit_as(people.alice, small_fleet, "waiting")
    page = sign_in(browser, live_server, "alice")
    page.set_viewport_size({"width": width, "height": 900})
    # On a phone the jobs list shows each job in short lines, without the priority box: its
    # priority is set on its page.
    pages = (f"/jobs/{job.pk}/", "/jobs/") if width > 640 else (f"/jobs/{job.pk}/",)
    for where in pages:
        page.goto(live_server.url + where)
        box = page.get_by_label("Priority")
        box.click()
        box.press("Control+a")
        box.press("Backspace")
        box.press("Enter")
        expect(page.get_by_role("alert")).to_be_visible()
        expect(page.get_by_role("navigation", name="Main")).to_be_visible()
        expect(page.locator("h1")).to_be_visible()
        assert page.evaluate("document.querySelectorAll('form').length") > 1
    assert Job.objects.get(pk=job.pk).scheduling_priority == 0
