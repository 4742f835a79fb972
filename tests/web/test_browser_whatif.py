"""The what-if page in a browser: draft, watch the replay, compare side by side, apply."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from quotaportal.quotas import services
from quotaportal.quotas.models import QuotaShare, WhatIf
from quotaportal.quotas.services.shares import limits_of
from quotaportal.tick.run import run_tick
from tests.web.builders import PASSWORD, shot, sign_in, submit_to_vision

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def history(people, small_fleet, settings):
    """Two teams' jobs over the last hour on 2 instances: vision waits behind nlp's."""
    settings.QP_WHATIF_IN_PROCESS = True
    add = services.create_share
    from quotaportal.quotas.models import Team

    add(
        people.admin,
        job_queue=small_fleet,
        name="nlp",
        team=Team.objects.get(name="nlp"),
        capacity_limits={"a100": 1},
        sharing_strategy="LEND_AND_BORROW",
    )
    t0 = timezone.now() - timedelta(hours=1)
    for index in range(8):
        share = "vision" if index % 2 else "nlp"
        user = people.alice if share == "vision" else people.bob
        at = t0 + timedelta(seconds=30 * index)
        job = services.submit_job(
            user,
            job_queue=small_fleet,
            quota_share=share,
            capacity_unit="a100",
            name=f"h{index}",
            now=at,
        )
        run_tick(small_fleet.pk, now=at)
        services.mark_started(job, now=at)
        services.end_attempt(
            job, succeeded=True, status_reason="ok", exit_code=0, now=at + timedelta(minutes=5)
        )
    return small_fleet


def test_an_admin_compares_a_draft_with_today_and_applies_it(browser, live_server, history):
    page = sign_in(browser, live_server, "ada")
    page.get_by_role("link", name="What if").click()
    page.get_by_role("link", name="gpu").click()
    wrap = page.locator(".table-wrap").first
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "every column fits 1280 px"
    page.get_by_label("Environment capacity").fill("a100=4")
    page.get_by_label("Limits of vision").fill("a100=3")
    page.get_by_label("Limits of vision").press("Enter")  # the keyboard sends it too
    expect(page.get_by_test_id("compare")).to_be_visible(timeout=30_000)
    expect(page.get_by_test_id("chart-today")).to_be_visible()
    expect(page.get_by_test_id("chart-draft")).to_be_visible()
    for side in ("today", "draft"):  # side by side, each tall enough and its labels legible
        chart = page.get_by_test_id(f"chart-{side}")
        assert chart.bounding_box()["height"] >= 180
        sizes = chart.locator("text").evaluate_all(
            "labels => labels.map(l => l.getBoundingClientRect().height)"
        )
        assert min(sizes) >= 10, sizes
    expect(page.get_by_test_id("changes")).to_contain_text("Capacity: 2 a100 → 4 a100")
    expect(page.get_by_test_id("changes")).to_contain_text("Share vision: limits 2 a100 → 3 a100")
    expect(page.get_by_test_id("verdict")).to_contain_text("With the draft, waits p90 fall")
    shot(page, "what-if-compare")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Apply the draft").click()
    expect(page.get_by_test_id("what-if-status")).to_have_text("APPLIED")
    assert "• Share vision: limits 2 a100 → 3 a100" in asked[0], "the confirmation repeats it"
    assert limits_of(QuotaShare.objects.get(name="vision")) == {"a100": 3}


def test_a_bad_limit_is_shown_next_to_it_and_nothing_is_replayed(browser, live_server, history):
    page = sign_in(browser, live_server, "ada")
    page.goto(f"{live_server.url}/what-if/queues/{history.pk}/")
    page.get_by_label("Limits of vision").fill("lots")
    page.get_by_role("button", name="Replay both").click()
    expect(page.get_by_role("alert").first).to_contain_text("unit=count")
    assert not WhatIf.objects.exists()


def test_the_what_if_pages_fit_a_phone(browser, live_server, history, people):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/what-if/queues/{history.pk}/")
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, "what-if-draft-phone")
    page.get_by_role("button", name="Replay both").click()
    expect(page.get_by_test_id("compare")).to_be_visible(timeout=30_000)
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, "what-if-compare-phone")


def test_a_waiting_job_shows_when_it_should_start(browser, live_server, small_fleet, people):
    from quotaportal.whatif.estimates import refresh_estimates

    submit_to_vision(people.alice, small_fleet, "first", "second", simulated_duration_seconds=900)
    run_tick(small_fleet.pk)
    waiting = services.submit_job(
        people.alice,
        job_queue=small_fleet,
        quota_share="vision",
        capacity_unit="a100",
        name="waiting",
        simulated_duration_seconds=60,
    )
    run_tick(small_fleet.pk)
    refresh_estimates(small_fleet)
    page = sign_in(browser, live_server, "alice")
    page.goto(f"{live_server.url}/jobs/{waiting.pk}/")
    expect(page.get_by_test_id("estimate")).to_contain_text("in about 1")
    expect(page.get_by_test_id("estimate")).to_contain_text("recent jobs of the same size")
    shot(page, "job-estimate")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/jobs/")
    expect(page.locator("tr[data-job=waiting]")).to_contain_text("starts in about")
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    shot(page, "jobs-estimate-phone")
