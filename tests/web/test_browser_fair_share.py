"""Fair share in a browser, by keyboard, at 1280 px and on a phone: an admin switches the
policy on in the queue's settings (a bad half-life refused beside its field first), the
standings appear beside the shares, and the waiting borrower's page says who borrows first.
Screenshots: test-artifacts/fair-share-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from quotaportal.quotas.models import JobQueue
from tests.builders import borrowed_yesterday, fair_borrowers, wants_to_borrow
from tests.web.builders import PASSWORD, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def borrowers(people):
    queue = fair_borrowers(people.admin)
    for user in (people.admin, people.alice):
        user.set_password(PASSWORD)
        user.save()
    borrowed_yesterday("vision", 10.0)
    return queue


@pytest.mark.parametrize("width", [1280, 390])
def test_an_admin_switches_fair_share_on_by_keyboard_and_a_scientist_reads_why(
    browser, live_server, borrowers, people, width
):
    page = sign_in(browser, live_server, "ada", width=width)
    page.goto(f"{live_server.url}/manage/queues/{borrowers.pk}/")
    half_life = page.get_by_label("Fair-share half-life (hours)")
    half_life.fill("0")
    half_life.press("Enter")
    expect(page.get_by_role("alert").first).to_contain_text("greater than or equal to 1")
    assert JobQueue.objects.get(pk=borrowers.pk).fair_share_half_life_seconds is None
    half_life = page.get_by_label("Fair-share half-life (hours)")
    half_life.fill("168")
    half_life.press("Enter")
    expect(page.get_by_role("status")).to_be_visible()
    assert JobQueue.objects.get(pk=borrowers.pk).fair_share_half_life_seconds == 7 * 86_400
    standing = page.locator('tr[data-share="vision"] [data-testid="standing"]')
    expect(standing).to_contain_text("9.")
    box = standing.bounding_box()
    assert box["x"] + box["width"] <= width, "the standing sits within the screen"
    shot(page, f"fair-share-queue-{width}")
    page.context.close()

    vision, _ = wants_to_borrow(people, borrowers)
    page = sign_in(browser, live_server, "alice", width=width)
    page.goto(f"{live_server.url}/jobs/{vision.pk}/")
    reason = page.get_by_test_id("fair-share-reason")
    expect(reason).to_contain_text("speech borrows first.")
    box = reason.bounding_box()
    assert box["x"] + box["width"] <= width, "the sentence wraps within the screen"
    shot(page, f"fair-share-job-{width}")
    page.context.close()
