"""Pages that explain themselves, at 1280 px and on a phone, by keyboard: error pages that keep
the product around them, the jobs list searched and sorted, a waiting job's estimate."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from quotaportal.quotas import services
from quotaportal.tick.run import run_tick
from quotaportal.whatif.estimates import refresh_estimates
from tests.web.builders import sign_in, submit_to_vision

pytestmark = pytest.mark.django_db(transaction=True)
WIDTHS = [1280, 390]


def fits(page) -> bool:
    return not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")


@pytest.mark.parametrize("width", WIDTHS)
def test_refusals_and_missing_pages_keep_the_navigation(browser, live_server, small_fleet, width):
    page = sign_in(browser, live_server, "alice", width=width)
    answer = page.goto(f"{live_server.url}/manage/")
    assert answer.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("You cannot open this page")
    expect(page.get_by_role("navigation", name="Main")).to_be_attached()
    assert fits(page)
    answer = page.goto(f"{live_server.url}/jobs/{uuid.uuid4()}/" + "x" * 300)
    assert answer.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("alert")).not_to_contain_text("x" * 100)  # the address cut short
    page.get_by_role("link", name="Jobs").last.focus()
    page.keyboard.press("Enter")  # the way back, by keyboard
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    assert fits(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_jobs_list_is_searched_and_sorted_by_keyboard(
    browser, live_server, people, small_fleet, width
):
    submit_to_vision(people.alice, small_fleet, "sweep-a", "sweep-b", "eval-c")
    services.set_priority(
        people.alice,
        small_fleet.jobs.get(name="sweep-a"),
        7,
    )
    page = sign_in(browser, live_server, "alice", width=width)
    page.goto(f"{live_server.url}/jobs/")
    page.get_by_label("Name").fill("sweep")
    page.get_by_label("Sort").select_option("-priority")
    page.get_by_label("Name").press("Enter")
    rows = page.locator("tr[data-job]")
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-job", "sweep-a")  # priority 7 first
    assert "name=sweep" in page.url
    assert "sort=-priority" in page.url
    assert fits(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_waiting_jobs_estimate_gives_a_range_at_both_widths(
    browser, live_server, people, small_fleet, width
):
    submit_to_vision(people.alice, small_fleet, "first", "second", simulated_duration_seconds=900)
    run_tick(small_fleet.pk)
    (waiting,) = submit_to_vision(people.alice, small_fleet, "waiting")
    run_tick(small_fleet.pk)
    refresh_estimates(small_fleet)
    page = sign_in(browser, live_server, "alice", width=width)
    page.goto(f"{live_server.url}/jobs/{waiting.pk}/")
    estimate = page.get_by_test_id("estimate")
    expect(estimate).to_contain_text("in about")
    expect(estimate).not_to_contain_text("in about 0 minutes")
    expect(page.get_by_test_id("estimate-range")).to_contain_text("likely between")
    assert fits(page)
