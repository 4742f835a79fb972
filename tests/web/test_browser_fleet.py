"""The fleet overview in a browser: every environment and queue at a glance, live, linking into
each queue's dashboard; at 1280 px and on a phone, by keyboard too."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from quotaportal.tick.run import run_tick
from tests.builders import another_queue
from tests.web.builders import shot, sign_in, submit_to_vision

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_environments(people, small_fleet):
    """small_fleet (2 × a100, full, one job waiting) and a lab environment with an idle queue."""
    submit_to_vision(people.alice, small_fleet, "first", "second", "waiting")
    run_tick(small_fleet.pk)
    another_queue(
        people.admin,
        name="lab",
        unit="h100",
        capacity=3,
        backend="SIMULATED",
        share="lab-share",
        team="nlp",
        strategy="RESERVE",
        queue_name="lab-queue",
    )
    return small_fleet


def test_the_fleet_shows_every_queue_live_and_leads_to_its_dashboard(
    browser, live_server, people, two_environments
):
    page = sign_in(browser, live_server, "alice")
    page.get_by_role("link", name="Fleet").click()
    gpu = page.locator("tr[data-queue=gpu]")
    expect(gpu).to_contain_text("2 of 2 a100")
    expect(gpu).to_contain_text("1 waiting")
    expect(gpu).to_contain_text("share at its limit")
    expect(page.locator("tr[data-queue=lab-queue]")).to_contain_text("0 of 3 h100")
    expect(page.locator("section[data-environment=lab]")).to_contain_text("Capacity now: 3 × h100")
    wrap = page.locator(".table-wrap").first
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth")
    shot(page, "fleet")

    submit_to_vision(people.alice, two_environments, "later")
    expect(gpu).to_contain_text("2 waiting", timeout=15_000)  # it refreshes by itself

    page.get_by_role("link", name="gpu", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/\?queue=gpu$"))
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()


def test_the_fleet_fits_a_phone(browser, live_server, people, two_environments):
    page = sign_in(browser, live_server, "ada")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/fleet/")
    expect(page.locator("tr[data-queue=gpu]")).to_contain_text("1 waiting")
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, "fleet-phone")
