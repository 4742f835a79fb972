"""The usage page in a browser: an admin picks a period and a grouping by keyboard, reads
the table and the chart, and downloads the CSV, at 1280 px and on a phone."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from playwright.sync_api import expect

from quotaportal.usage import rollup
from tests.usage import story
from tests.web.builders import PASSWORD, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def used(people, fleet):
    for user in (people.admin, people.alice, people.bob):
        user.set_password(PASSWORD)
        user.save()
    story.reclaimed(people, fleet, story.hours_ago(3))
    rollup.roll_up()


@pytest.mark.parametrize("width", [1280, 390])
def test_an_admin_reads_usage_by_person_by_keyboard(browser, live_server, used, width):
    page = sign_in(browser, live_server, "ada", width=width)
    page.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    page.get_by_role("link", name="24 h").click()
    expect(page.locator('tr[data-key="vision"]')).to_be_visible()
    page.get_by_label("Group by").select_option("user")
    page.get_by_role("button", name="Show").press("Enter")
    expect(page.locator('tr[data-key="alice"]')).to_be_visible()
    expect(page.get_by_test_id("usage-period")).to_contain_text("grouped by user")
    assert "period=24h" in page.url  # the preset period kept
    expect(page.locator('tr[data-key="bob"]')).to_contain_text("2.00")
    expect(page.get_by_test_id("usage-chart")).to_be_visible()
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    with page.expect_download() as download:
        page.get_by_test_id("usage-csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    bob = next(r for r in rows if r["key"] == "bob")
    assert float(bob["own_instance_seconds"]) == 2 * 3600
    if width > 640:
        shot(page, "usage")
    else:
        shot(page, "usage-phone")


def test_a_bad_period_is_refused_beside_the_field(browser, live_server, used):
    page = sign_in(browser, live_server, "bob", width=390)
    page.goto(f"{live_server.url}/usage/")
    page.get_by_label("From (UTC)").fill("2026-12-02T10:00")
    page.get_by_label("To (UTC)").fill("2026-12-01T10:00")
    page.get_by_label("To (UTC)").press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("start must be before end")
    expect(page.locator('tr[data-key="vision"]')).to_have_count(0)


def test_an_admin_opens_suggested_limits_by_keyboard_on_a_phone(
    browser, live_server, used, settings
):
    settings.QP_WHATIF_IN_PROCESS = True
    page = sign_in(browser, live_server, "ada", width=390)
    page.goto(f"{live_server.url}/usage/?period=24h&group_by=share")
    expect(page.get_by_test_id("quota-review")).to_be_attached()
    page.get_by_role("button", name="Suggest limits for gpu").press("Enter")
    expect(page.get_by_role("heading", name="What if: queue gpu")).to_be_visible()
    expect(page.get_by_text("(last 24 h)")).to_be_visible()
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
