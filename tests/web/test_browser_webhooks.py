"""The webhooks console and the e-mail choices in a browser: by keyboard, at 1280 px and on a
phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.notifications.models import EmailPreference, Webhook
from tests.web.builders import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_an_admin_adds_a_webhook_by_keyboard(browser, live_server, people, small_fleet, width):
    page = sign_in(browser, live_server, "ada", width=width)
    page.goto(f"{live_server.url}/manage/webhooks/")
    page.get_by_label("Name").fill("ops")
    page.get_by_label("URL").fill("ftp://example.org/hook")
    page.get_by_label("Secret").fill("a-secret-of-twenty-chars")
    page.get_by_label("Secret").press("Enter")
    expect(page.get_by_role("alert").first).to_contain_text("an http:// or https:// URL (not")
    page.get_by_label("URL").fill("https://hooks.example.org/quotaportal")
    page.get_by_label("Secret").fill("a-secret-of-twenty-chars")  # never sent back to the page
    page.get_by_label("Preemption Started").check()
    page.get_by_label("Secret").press("Enter")
    expect(page.get_by_role("heading", name="Webhook ops")).to_be_visible()
    expect(page.get_by_text("Nothing sent yet")).to_be_visible()
    hook = Webhook.objects.get()
    assert hook.detail_types == ["Batch Service Job Preemption Started"]
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, f"webhook-{width}")


def test_a_scientist_chooses_email_by_keyboard_on_a_phone(
    browser, live_server, people, small_fleet
):
    people.alice.email = "alice@example.org"
    people.alice.save()
    page = sign_in(browser, live_server, "alice", width=390)
    page.get_by_role("link", name="Access").click()
    page.get_by_role("navigation", name="Your access").get_by_role("link", name="E-mail").click()
    expect(page.get_by_text("alice@example.org")).to_be_visible()
    page.get_by_label("When a job of mine is preempted").focus()
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Saved: you get e-mail as ticked.")).to_be_visible()
    assert EmailPreference.objects.get(user=people.alice).on_preempted
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
