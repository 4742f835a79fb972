"""The Access area in a browser: a scientist makes a read-only API token by keyboard, copies
it from the one page that shows it, uses it, and revokes it, at 1280 px and on a phone."""

from __future__ import annotations

import pytest
import requests
from playwright.sync_api import expect

from quotaportal.quotas.models import PersonalToken
from tests.web.builders import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_scientist_makes_uses_and_revokes_a_token_by_keyboard(
    browser, live_server, small_fleet, width
):
    page = sign_in(browser, live_server, "alice", width=width)
    page.get_by_role("link", name="Access").click()
    expect(page.get_by_role("heading", name="API tokens")).to_be_visible()
    expect(page.get_by_role("navigation", name="Your access")).to_contain_text("AWS access keys")

    page.get_by_label("Name").fill("nightly report")
    page.get_by_label("Read only").check()
    page.get_by_label("Expires").select_option(label="in 7 days")
    page.get_by_label("Name").press("Enter")
    key = page.get_by_test_id("new-token").inner_text().strip()
    assert key.startswith("qp_")
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    if width > 640:
        shot(page, "access-tokens")
    else:
        shot(page, "access-tokens-phone")

    headers = {"Authorization": f"Bearer {key}"}
    api = f"{live_server.url}/api/v1/jobs/"
    assert requests.get(api, headers=headers, timeout=10).status_code == 200
    write = requests.post(api, json={"name": "x"}, headers=headers, timeout=10)
    assert write.status_code == 403
    assert "read-only" in write.json()["detail"]

    page.goto(page.url)  # shown once: gone from the page now, its prefix left to tell it apart
    expect(page.get_by_test_id("new-token")).to_have_count(0)
    row = page.get_by_role("row").filter(has_text="nightly report")
    expect(row).to_contain_text(key[:10])
    expect(row).to_contain_text("Read only")
    expect(row).to_contain_text("from 127.0.0.1")  # its last use
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Revoke nightly report").press("Enter")
    expect(page.get_by_role("status")).to_contain_text("revoked")
    assert requests.get(api, headers=headers, timeout=10).status_code == 401
    assert PersonalToken.objects.get(name="nightly report").revoked


def test_a_token_without_a_name_is_refused_beside_the_field(browser, live_server, small_fleet):
    page = sign_in(browser, live_server, "alice", width=390)
    page.goto(f"{live_server.url}/account/tokens/")
    page.get_by_label("Name").fill("   ")
    page.get_by_label("Name").press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("required")
    assert not PersonalToken.objects.filter(user__username="alice", name="").exists()
