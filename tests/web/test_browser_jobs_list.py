"""The jobs list in a browser: it refreshes by itself (not while a priority box has the
focus), filters by who submitted, and on a phone shows each job in a few short lines."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.builders import shot, sign_in, submit_to_vision

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_list_refreshes_itself_and_filters_by_submitter(
    browser, live_server, people, small_fleet
):
    submit_to_vision(people.alice, small_fleet, "first")
    page = sign_in(browser, live_server, "ada")
    page.goto(f"{live_server.url}/jobs/")
    expect(page.locator("tr[data-job=first]")).to_be_visible()
    submit_to_vision(people.admin, small_fleet, "later")
    expect(page.locator("tr[data-job=later]")).to_be_visible(timeout=15_000)

    page.get_by_label("Submitted by").fill("alice")
    page.get_by_label("Submitted by").press("Enter")
    expect(page.locator("tr[data-job=first]")).to_be_visible()
    expect(page.locator("tr[data-job=later]")).to_have_count(0)


def test_a_phone_shows_twenty_five_jobs_in_short_rows(browser, live_server, people, small_fleet):
    for index in range(25):
        submit_to_vision(people.alice, small_fleet, f"sweep-{index:02d}")
    page = sign_in(browser, live_server, "alice")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/jobs/")
    expect(page.locator("tr[data-job]")).to_have_count(25)
    shot(page, "jobs-phone")
    row = page.locator("tr[data-job=sweep-00]")
    assert row.evaluate("r => r.getBoundingClientRect().height") <= 90
    expect(row).to_contain_text("RUNNABLE")
    assert page.evaluate("document.documentElement.scrollHeight") < 3200
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")


@pytest.mark.parametrize("width", [390, 1280])
def test_each_filter_label_sits_with_its_box(browser, live_server, people, small_fleet, width):
    """A label at the end of one line with its box on the next reads as the wrong box's."""
    page = sign_in(browser, live_server, "alice", width=width)
    page.goto(f"{live_server.url}/jobs/")
    for label in ("Queue", "Share", "Status", "Name", "Submitted by", "Sort"):
        box = page.get_by_label(label, exact=True).bounding_box()
        tag = page.locator(f"label:text-is('{label}')").bounding_box()
        assert abs(tag["y"] + tag["height"] / 2 - (box["y"] + box["height"] / 2)) < 12, label
        assert tag["x"] + tag["width"] <= box["x"] + 1, f"{label}: the label leads its box"
    shot(page, f"jobs-filters-{width}")
