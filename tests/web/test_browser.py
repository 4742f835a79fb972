"""Browser tests: Playwright driving the Debian chromium package against a live server."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.quotas.models import Job, QuotaShare
from tests.web.builders import PASSWORD, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_admin_creates_a_share_in_the_browser(browser, live_server, small_fleet):
    page = sign_in(browser, live_server, "ada")
    page.get_by_role("link", name="Shares").click()
    page.get_by_role("link", name="New quota share").click()
    page.get_by_label("Job queue").select_option("gpu")
    page.get_by_label("Name").fill("robots")
    page.get_by_label("Team").select_option("nlp")
    page.get_by_label("Sharing strategy").select_option("LEND_AND_BORROW")
    page.get_by_label("Borrow limit (%)").fill("50")
    page.get_by_label("Capacity unit 1").select_option("a100")
    page.get_by_label("Max capacity 1").fill("0")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert").first).to_contain_text(
        "from 1 to 1,000,000"
    )  # next to the table
    shot(page, "share-editor")
    page.get_by_label("Max capacity 1").fill("1")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("tr[data-share=robots]")).to_contain_text("LEND_AND_BORROW (50%)")
    assert QuotaShare.objects.get(name="robots").team.name == "nlp"


def test_raising_a_priority_shows_the_in_share_preemption_live(
    browser, live_server, small_fleet, scheduler
):
    page = sign_in(browser, live_server, "alice")
    for name, priority in (("first", 1), ("second", 0)):
        page.get_by_role("link", name="Submit").click()
        page.get_by_label("Quota share").select_option(label="gpu / vision")
        page.get_by_label("Name").fill(name)
        page.get_by_label("Capacity unit").select_option("a100")
        page.get_by_label("Quantity").fill("2")
        page.get_by_label("Scheduling priority").fill(str(priority))
        page.get_by_role("button", name="Submit").click()
        expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(page.get_by_test_id("pending")).to_contain_text("at its limit", timeout=10_000)

    dashboard = page.context.new_page()
    dashboard.goto(f"{live_server.url}/")
    expect(dashboard.locator("#preemptions")).to_contain_text("None yet")

    # Raise the waiting job above the running one, inline, on its own page.
    page.get_by_label("Priority").fill("5")
    page.get_by_role("button", name="Set").click()
    expect(page.get_by_label("Priority")).to_have_value("5")
    expect(page.get_by_test_id("status")).to_have_text("RUNNING", timeout=15_000)
    shot(page, "job-page")

    # The dashboard, never reloaded, shows the preemption once its live part refreshes.
    expect(dashboard.locator("#preemptions")).to_contain_text("in-share", timeout=15_000)
    expect(dashboard.locator("#preemptions")).to_contain_text("first")
    shot(dashboard, "dashboard")
    assert Job.objects.get(name="first").status == "RUNNABLE"


def test_a_scientist_has_no_share_controls_and_forged_posts_are_refused(
    browser, live_server, small_fleet
):
    page = sign_in(browser, live_server, "alice")
    expect(page.get_by_role("link", name="Shares")).to_have_count(0)
    share = QuotaShare.objects.get(name="vision")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    forged = page.request.post(
        f"{live_server.url}/shares/{share.pk}/toggle/",
        headers={"X-CSRFToken": token, "Referer": live_server.url},
    )
    assert forged.status == 403
    assert QuotaShare.objects.get(pk=share.pk).state == "ENABLED"


def test_pages_work_at_phone_width(browser, live_server, small_fleet):
    context = browser.new_context(viewport={"width": 375, "height": 740})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.keyboard.press("Enter")  # keyboard only
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375, "the dashboard must not scroll sideways on a phone"
    shot(page, "dashboard-phone")
