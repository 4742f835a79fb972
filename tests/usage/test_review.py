"""Quota review: each share flagged where its figures say its terms cost others, and limits
suggested from the measured use, opened as a what-if on the period's own jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, WhatIf
from quotaportal.usage import reports, review, rollup
from tests.usage.story import hours_ago, submitted, tick

pytestmark = pytest.mark.django_db


@pytest.fixture
def reserve_idle(people, fleet):
    """nlp RESERVEs 2 a100 and runs nothing for 3 hours while vision's second job waits."""
    services.update_share(people.admin, fleet.nlp, sharing_strategy="RESERVE")
    t0 = hours_ago(3)
    Event.objects.filter(kind=EventKind.SHARE_CHANGED).update(time=t0 - timedelta(hours=1))
    submitted(people.alice, fleet, t0, name="a", quantity=2)
    submitted(people.alice, fleet, t0 + timedelta(seconds=1), name="b", quantity=2)
    tick(fleet, t0)
    rollup.roll_up(since=t0)
    return t0


def share_rows(start, end):
    report = reports.usage_report(start, end, "share", reports.Scope())
    return {row["quota_share"]: row for row in report["rows"]}


def test_an_idle_reserve_share_and_the_share_that_waited_are_flagged(people, fleet, reserve_idle):
    rows = share_rows(reserve_idle, timezone.now())
    nlp_flags = review.flags(rows["nlp"], "RESERVE")
    assert len(nlp_flags) == 1
    assert nlp_flags[0].startswith("RESERVE held")
    vision_flags = review.flags(rows["vision"], "LEND_AND_BORROW")
    assert any("its jobs waited while" in flag for flag in vision_flags)


def test_a_share_within_its_terms_is_not_flagged(people, fleet):
    t0 = hours_ago(2)
    submitted(people.alice, fleet, t0, name="a", quantity=2)
    tick(fleet, t0)
    rows = share_rows(t0, timezone.now())
    assert review.flags(rows["vision"], "LEND_AND_BORROW") == []


def test_the_suggestion_follows_the_busiest_hours_and_lends_idle_reserve(
    people, fleet, reserve_idle
):
    draft, reasons = review.suggested_draft(
        fleet.queue, reserve_idle, rollup.floor_hour(timezone.now())
    )
    shares = {s["name"]: s for s in draft["shares"]}
    # vision ran 2 instances every hour; nlp ran nothing (keeps its limit) but now lends.
    assert shares["vision"]["limits"] == {"a100": 2}
    assert shares["nlp"]["limits"] == {"a100": 2}
    assert shares["nlp"]["strategy"] == "LEND"
    assert any(line.startswith("nlp: strategy RESERVE → LEND (it held") for line in reasons)


def test_suggested_limits_fit_the_capacity(people, fleet):
    t0 = hours_ago(2)
    submitted(people.alice, fleet, t0, name="a", quantity=4)
    tick(fleet, t0)
    rollup.roll_up(since=t0)
    services.update_share(people.admin, fleet.nlp, capacity_limits={"a100": 3})
    draft, reasons = review.suggested_draft(fleet.queue, t0, rollup.floor_hour(timezone.now()))
    limits = {s["name"]: s["limits"]["a100"] for s in draft["shares"]}
    # 4 + 3 on 4 instances: nlp scaled down to 1; vision keeps room for its 4-instance job.
    assert limits == {"vision": 4, "nlp": 1}
    assert any("scaled to the capacity of 4" in line for line in reasons)


def test_an_admin_opens_the_suggestion_as_a_what_if(
    people, fleet, reserve_idle, settings, django_capture_on_commit_callbacks
):
    settings.QP_WHATIF_IN_PROCESS = True
    client = Client()
    client.force_login(people.admin)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post("/usage/suggest/", {"job_queue": "gpu", "period": "24h"})
    run = WhatIf.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == f"/what-if/{run.pk}/"
    assert (run.source, run.since_hours) == ("history", 24)
    assert {s["name"]: s["strategy"] for s in run.draft["shares"]}["nlp"] == "LEND"
    page = client.get("/usage/?period=24h&group_by=share").content.decode()
    assert "Suggest limits for gpu" in page
    assert "RESERVE held" in page
    # The what-if says why it changes the strategy, not only that it does.
    shown = client.get(f"/what-if/{run.pk}/").content.decode()
    assert "Share nlp: strategy RESERVE → LEND" in shown
    assert "nlp: strategy RESERVE → LEND (it held" in shown


def test_a_reserve_share_idle_for_a_moment_is_not_flagged_nor_lent(people, fleet):
    """nlp RESERVEs 2 a100, idle for 2 seconds while vision's job waited: no "0.0
    instance-hours idle" flag, and no strategy change suggested for it."""
    services.update_share(people.admin, fleet.nlp, sharing_strategy="RESERVE")
    t0 = hours_ago(2)
    Event.objects.filter(kind=EventKind.SHARE_CHANGED).update(time=t0 - timedelta(hours=1))
    submitted(people.alice, fleet, t0, name="a", quantity=2)
    waiting = submitted(people.alice, fleet, t0, name="b", quantity=2)
    tick(fleet, t0)
    submitted(people.bob, fleet, t0 + timedelta(seconds=2), share="nlp", name="n", quantity=2)
    services.terminate_job(people.alice, waiting, "not needed", now=t0 + timedelta(seconds=2))
    tick(fleet, t0 + timedelta(seconds=2))
    rollup.roll_up(since=t0)
    rows = share_rows(t0, timezone.now())
    assert 0 < rows["nlp"]["idle_while_waiting_instance_seconds"] < 60
    assert review.flags(rows["nlp"], "RESERVE") == []
    draft, reasons = review.suggested_draft(fleet.queue, t0, rollup.floor_hour(timezone.now()))
    assert {s["name"]: s["strategy"] for s in draft["shares"]}["nlp"] == "RESERVE"
    assert not [line for line in reasons if "strategy" in line]


def test_a_draft_that_waits_longer_says_so_before_it_is_applied(
    people, fleet, settings, django_capture_on_commit_callbacks
):
    """A draft halving capacity on a busy hour: its replay's waits rise, and the page warns
    above the verdict and in the confirmation of Apply."""
    settings.QP_WHATIF_IN_PROCESS = True
    t0 = hours_ago(2)
    for i in range(4):
        job = submitted(people.alice, fleet, t0 + timedelta(minutes=i), name=f"j{i}", quantity=2)
        tick(fleet, t0 + timedelta(minutes=i))
        services.mark_started(job, now=t0 + timedelta(minutes=i))
        services.end_attempt(
            job, succeeded=True, status_reason="ok", now=t0 + timedelta(minutes=i + 10)
        )
    from quotaportal.whatif import runs as whatif

    draft = whatif.draft_of(fleet.queue)
    draft["capacity"] = {"a100": 2}
    draft["shares"] = [{**s, "limits": {"a100": 2}} for s in draft["shares"]]
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.start_what_if(people.admin, fleet.queue, draft, "history", 24)
    client = Client()
    client.force_login(people.admin)
    shown = client.get(f"/what-if/{run.pk}/").content.decode()
    assert 'data-testid="worse"' in shown
    assert "the draft does worse than today" in shown
    assert "waits p90 rise from" in shown
    confirm = shown[shown.index("data-confirm=") :].split('"')[1]
    assert "the draft does worse: waits p90 rise" in confirm


def test_scientists_cannot_ask_for_a_suggestion(people, fleet, reserve_idle):
    client = Client()
    client.force_login(people.bob)
    assert client.post("/usage/suggest/", {"job_queue": "gpu"}).status_code == 403
    assert "Suggest limits" not in client.get("/usage/?group_by=share").content.decode()
    assert not WhatIf.objects.exists()


def test_a_suggested_limit_never_strands_the_shares_largest_job(people, fleet):
    t0 = hours_ago(2)
    submitted(
        people.bob, fleet, t0, share="nlp", name="n", quantity=2, simulated_duration_seconds=600
    )
    tick(fleet, t0)
    tick(fleet, t0 + timedelta(seconds=1))
    tick(fleet, t0 + timedelta(seconds=601))
    rollup.roll_up(since=t0)
    draft, _ = review.suggested_draft(fleet.queue, t0, rollup.floor_hour(timezone.now()))
    # 2 instances for 10 minutes: an hourly average of 0.33, but its job needs 2.
    assert {s["name"]: s["limits"] for s in draft["shares"]}["nlp"] == {"a100": 2}
