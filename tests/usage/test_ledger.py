"""Usage reports from a story run through the real tick, against ledgers computed by hand:
the same figures live, from the hourly rows, over REST and as CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.quotas import services
from quotaportal.quotas.models import Job, JobAttempt
from quotaportal.usage import reports, rollup
from quotaportal.usage.models import UsageHour
from tests.builders import TOKEN, samples, value
from tests.usage import story
from tests.usage.story import submitted, tick

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture
def t0():
    return story.hours_ago(3)


@pytest.fixture
def reclaimed(people, fleet, t0):
    return story.reclaimed(people, fleet, t0)


def by_key(report):
    return {row["key"]: row for row in report["rows"]}


def test_a_borrower_reclaimed_by_hand(people, fleet, t0, reclaimed):
    report = reports.usage_report(t0, t0 + 2 * HOUR, "share", reports.Scope())
    vision, nlp = by_key(report)["gpu/vision"], by_key(report)["gpu/nlp"]
    # big: 4 × 30 min (2 own, 2 borrowed), preempted; again from 90 min: 4 × 30 min, same split.
    assert vision["instance_seconds"] == 4 * 1800 + 4 * 1800
    assert vision["own_instance_seconds"] == 2 * 1800 + 2 * 1800
    assert vision["borrowed_instance_seconds"] == 2 * 1800 + 2 * 1800
    assert vision["preempted_instance_seconds"] == 4 * 1800
    assert vision["preempted_cross_share_instance_seconds"] == 4 * 1800
    # n1: 2 × 60 min, own; nlp lent its 2 idle instances while big held them.
    assert nlp["instance_seconds"] == nlp["own_instance_seconds"] == 2 * 3600
    assert nlp["lent_instance_seconds"] == 2 * 1800 + 2 * 1800
    assert vision["lent_instance_seconds"] == 0
    assert (vision["jobs"], vision["attempts"], nlp["jobs"]) == (1, 2, 1)
    # big waited from its preemption at 30 min to its restart at 90 min.
    assert vision["runnable_seconds"] == 3600
    assert vision["entitled_instance_seconds"] == 2 * 7200
    totals = report["totals"]
    assert totals["instance_seconds"] == 4 * 3600 + 2 * 3600


def test_the_hourly_rows_give_the_live_figures(people, fleet, t0, reclaimed):
    live = reports.usage_report(t0, t0 + 2 * HOUR, "team", reports.Scope())
    written = rollup.roll_up(since=t0)
    assert written > 0
    assert UsageHour.objects.filter(hour=t0, team="vision", user="alice").exists()
    rolled = reports.usage_report(t0, t0 + 2 * HOUR, "team", reports.Scope())
    assert rolled == live
    rollup.roll_up(since=t0)  # idempotent: the hours' rows are replaced, not added to
    assert reports.usage_report(t0, t0 + 2 * HOUR, "team", reports.Scope()) == live


def test_a_period_boundary_cuts_an_attempt(people, fleet, t0, reclaimed):
    rollup.roll_up(since=t0)
    # From t0 + 15 min to t0 + 45 min: big ran its first 15 min (then was preempted).
    report = reports.usage_report(
        t0 + timedelta(minutes=15), t0 + timedelta(minutes=45), "user", reports.Scope()
    )
    alice, bob = by_key(report)["alice"], by_key(report)["bob"]
    assert alice["instance_seconds"] == 4 * 900
    assert alice["borrowed_instance_seconds"] == 2 * 900
    assert alice["preempted_instance_seconds"] == 4 * 1800  # the whole lost attempt
    assert bob["instance_seconds"] == 2 * 900
    assert "" not in by_key(report)  # lent capacity is a share's, not a person's
    assert report["totals"]["lent_instance_seconds"] == 2 * 900


def test_an_open_attempt_counts_up_to_now(people, fleet, t0, reclaimed):
    big, _ = reclaimed
    now = timezone.now()
    report = reports.usage_report(t0, now, "user", reports.Scope())
    open_since = JobAttempt.objects.get(job=big, number=2).started_at
    expected = 4 * 1800 + 4 * (now - open_since).total_seconds()
    assert by_key(report)["alice"]["instance_seconds"] == pytest.approx(expected, abs=0.01)


def test_an_in_share_preemption_is_lost_work_of_its_kind(people, fleet, t0):
    low = submitted(people.alice, fleet, t0, name="low", quantity=2, scheduling_priority=1)
    tick(fleet, t0)
    fleet.vision.capacity_limits.update(max_capacity=2)
    submitted(people.bob, fleet, t0, share="nlp", name="n", quantity=2)
    high = submitted(
        people.alice, fleet, t0 + HOUR / 4, name="high", quantity=2, scheduling_priority=9
    )
    tick(fleet, t0 + HOUR / 4)
    assert Job.objects.get(pk=high.pk).status == "SCHEDULED"
    assert Job.objects.get(pk=low.pk).status == "RUNNABLE"
    report = reports.usage_report(t0, t0 + HOUR, "share", reports.Scope())
    vision = by_key(report)["gpu/vision"]
    assert vision["preempted_in_share_instance_seconds"] == 2 * 900
    assert vision["preempted_cross_share_instance_seconds"] == 0


def test_a_lowered_limit_turns_own_into_borrowed_from_that_moment(people, fleet, t0):
    submitted(people.bob, fleet, t0, share="nlp", name="n", quantity=2)
    tick(fleet, t0)
    from quotaportal.quotas.models import Event, EventKind

    services.update_share(people.admin, fleet.nlp, capacity_limits={"a100": 1})
    Event.objects.filter(kind=EventKind.SHARE_CHANGED).update(time=t0 + HOUR / 2)
    report = reports.usage_report(t0, t0 + HOUR, "share", reports.Scope())
    nlp = by_key(report)["gpu/nlp"]
    assert nlp["own_instance_seconds"] == 2 * 1800 + 1 * 1800
    assert nlp["borrowed_instance_seconds"] == 1 * 1800
    assert nlp["entitled_instance_seconds"] == 2 * 1800 + 1 * 1800


def test_a_reserve_share_idle_while_another_share_waits(people, fleet, t0):
    services.update_share(people.admin, fleet.nlp, sharing_strategy="RESERVE")
    from quotaportal.quotas.models import Event, EventKind

    Event.objects.filter(kind=EventKind.SHARE_CHANGED).update(time=t0 - HOUR)
    submitted(people.alice, fleet, t0, name="a", quantity=2)
    waiting = submitted(people.alice, fleet, t0 + timedelta(seconds=1), name="b", quantity=2)
    tick(fleet, t0)
    assert Job.objects.get(pk=waiting.pk).status == "RUNNABLE"
    report = reports.usage_report(t0, t0 + HOUR, "share", reports.Scope())
    assert by_key(report)["gpu/nlp"]["idle_while_waiting_instance_seconds"] == 2 * 3599
    assert by_key(report)["gpu/vision"]["idle_while_waiting_instance_seconds"] == 0


def test_waits_are_counted_from_submission_to_first_start(people, fleet, t0):
    submitted(people.alice, fleet, t0, name="a", quantity=4, simulated_duration_seconds=600)
    later = submitted(people.alice, fleet, t0 + timedelta(seconds=1), name="b", quantity=4)
    tick(fleet, t0)
    tick(fleet, t0 + timedelta(seconds=1))
    tick(fleet, t0 + timedelta(seconds=601))
    tick(fleet, t0 + timedelta(seconds=602))
    assert Job.objects.get(pk=later.pk).status in ("SCHEDULED", "RUNNING")
    report = reports.usage_report(t0, t0 + HOUR, "user", reports.Scope())
    alice = by_key(report)["alice"]
    assert alice["jobs"] == 2
    # Waits of 0 s and 600 s: p50 is 0, p90 within the buckets' 7 % of 600 s.
    assert alice["wait_p50_s"] == 0
    assert alice["wait_p90_s"] == pytest.approx(600, rel=0.08)


def api(user_token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token}")
    return client


def test_the_same_job_through_rest_and_csv(people, fleet, t0, reclaimed):
    rollup.roll_up(since=t0)
    params = {"start": t0.isoformat(), "end": (t0 + 2 * HOUR).isoformat(), "group_by": "share"}
    response = api(people.tokens["ada"]).get("/api/v1/usage/", params)
    assert response.status_code == 200, response.content
    rows = {r["key"]: r for r in response.json()["rows"]}
    assert rows["gpu/vision"]["borrowed_instance_seconds"] == 2 * 1800 + 2 * 1800
    assert rows["gpu/nlp"]["lent_instance_seconds"] == 2 * 3600
    response = api(people.tokens["ada"]).get("/api/v1/usage/", {**params, "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    vision = next(r for r in table if r["key"] == "gpu/vision")
    assert float(vision["borrowed_instance_seconds"]) == 2 * 1800 + 2 * 1800
    assert float(vision["preempted_instance_seconds"]) == 4 * 1800
    assert table[-1]["key"] == "total"
    client = Client()
    client.force_login(people.admin)
    period = {"start": params["start"][:16], "end": params["end"][:16], "group_by": "share"}
    page = client.get("/usage/", period).content.decode()
    row = page[page.index('data-key="gpu/vision"') :].split("</tr>")[0]
    # The same 2 instance-hours borrowed and 2 lost to preemption, on the page.
    assert '<td data-label="Borrowed" class="num">2.00</td>' in row
    assert '<td data-label="Lost to preemption" class="num">2.00<br>' in row
    assert "2.00 taken back by a lender" in row  # and which kind of preemption


def test_scientists_see_their_own_teams_only(people, fleet, t0, reclaimed):
    params = {"start": t0.isoformat(), "end": (t0 + 2 * HOUR).isoformat(), "group_by": "team"}
    body = api(people.tokens["bob"]).get("/api/v1/usage/", params).json()
    assert [r["key"] for r in body["rows"]] == ["nlp"]
    assert body["totals"]["instance_seconds"] == 2 * 3600
    body = api(people.tokens["bob"]).get("/api/v1/usage/", {**params, "team": "vision"}).json()
    assert body["rows"] == []
    assert APIClient().get("/api/v1/usage/", params).status_code in (401, 403)


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"start": "yesterday"}, "start", "ISO 8601"),
        ({"start": "x" * 60}, "start", "…"),
        ({"start": "2026-12-02T00:00:00Z", "end": "2026-12-01T00:00:00Z"}, "start", "before end"),
        ({"start": "2020-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "start", "400 days"),
        ({"group_by": "planet"}, "group_by", "valid choice"),
    ],
)
def test_bad_queries_say_what_to_fix(people, params, field, says):
    response = api(people.tokens["ada"]).get("/api/v1/usage/", params)
    assert response.status_code == 400
    assert says in str(response.json()[field])


def test_day_rows_give_the_live_figures(people, fleet):
    yesterday = rollup.floor_day(timezone.now()) - timedelta(days=1)
    story.reclaimed(people, fleet, yesterday + 10 * HOUR)
    start, end = yesterday - timedelta(days=1), timezone.now()
    for group_by in reports.GROUPS:
        live = reports.usage_report(start, end, group_by, reports.Scope())
        rollup.roll_up(since=start)
        assert UsageHour.objects.filter(span=24, hour=yesterday).exists()
        assert reports.usage_report(start, end, group_by, reports.Scope()) == live


def test_prometheus_counts_the_same_seconds(client, settings, people, fleet, t0, reclaimed):
    settings.QP_METRICS_TOKEN, settings.QP_METRICS_ALLOWED_IPS = TOKEN, []
    rollup.roll_up(since=t0)
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    name = "quotaportal_usage_instance_seconds_total"
    labels = {"job_queue": "gpu", "quota_share": "vision", "team": "vision"}
    assert value(found, name, **labels, kind="preempted") == 4 * 1800
    assert (
        value(found, name, **labels | {"quota_share": "nlp", "team": "nlp"}, kind="own") == 2 * 3600
    )
    report = reports.usage_report(t0, timezone.now(), "share", reports.Scope())
    borrowed = by_key(report)["gpu/vision"]["borrowed_instance_seconds"]
    assert value(found, name, **labels, kind="borrowed") == pytest.approx(borrowed, abs=5)


def test_week_rows_give_the_live_figures(people, fleet):
    last_week = rollup.floor_week(timezone.now()) - timedelta(weeks=1)
    story.reclaimed(people, fleet, last_week + timedelta(days=1, hours=10))
    start, end = last_week - timedelta(days=3, hours=5), timezone.now()
    live = reports.usage_report(start, end, "share", reports.Scope())
    rollup.roll_up(since=start)
    assert UsageHour.objects.filter(span=168, hour=last_week).exists()
    assert reports.usage_report(start, end, "share", reports.Scope()) == live
    vision = by_key(live)["gpu/vision"]
    assert vision["preempted_instance_seconds"] == 4 * 1800


def test_a_name_a_spreadsheet_would_run_is_exported_as_text(people, fleet, t0):
    hostile, token = services.create_user("=HYPERLINK(x)", teams=["vision"])
    submitted(hostile, fleet, t0, name="j", quantity=1)
    tick(fleet, t0)
    params = {"start": t0.isoformat(), "group_by": "user", "format": "csv"}
    table = api(token).get("/api/v1/usage/", params).content.decode()
    assert "\n'=HYPERLINK(x)," in table.replace("\r\n", "\n")
    assert "\n=HYPERLINK" not in table.replace("\r\n", "\n")
