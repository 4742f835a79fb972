"""Builders the tests share."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import expect

PASSWORD = "correct horse battery"


SHOTS = Path(
    os.environ.get("QP_SCREENSHOTS", Path(__file__).resolve().parents[2] / "test-artifacts")
)


def sign_in(browser, live_server, username, width=1280):
    """A signed-in page at `width` px (a phone's height below 640 px wide)."""
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 640 else 844})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    return page


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def submit_to_vision(user, queue, *names, **fields):
    """Jobs of one a100 each in share vision of `queue` (small_fleet's), one per name."""
    from quotaportal.quotas import services

    return [
        services.submit_job(
            user, job_queue=queue, quota_share="vision", capacity_unit="a100", name=name, **fields
        )
        for name in names
    ]
