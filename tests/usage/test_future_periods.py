"""A period that reaches past now: usage counts up to now and no further, through every
interface, and a finished story's figures equal the sum of its attempts for any window."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.quotas import services
from quotaportal.quotas.models import Job, JobAttempt
from quotaportal.usage import reports, rollup
from tests.builders import TOKEN, samples, value
from tests.usage import story

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
WEEK = timedelta(days=7)


@pytest.fixture
def t0():
    return story.hours_ago(3)


def by_key(report):
    return {row["key"]: row for row in report["rows"]}


def attempt_seconds(start, end) -> dict[str, dict[str, float]]:
    """Quantity × seconds of every attempt inside [start, end), by each grouping the reports
    offer, summed straight from the attempts' rows (an open attempt up to now)."""
    now = timezone.now()
    sums: dict[str, dict[str, float]] = {group: defaultdict(float) for group in reports.GROUPS}
    for attempt in JobAttempt.objects.select_related(
        "job__quota_share__team", "job__submitted_by", "job__capacity_unit", "job__job_queue"
    ):
        begin = max(attempt.started_at, start)
        stop = min(attempt.stopped_at or now, end, now)
        if stop <= begin:
            continue
        job = attempt.job
        seconds = job.quantity * (stop - begin).total_seconds()
        keys = {
            "team": job.quota_share.team.name,
            "share": f"{job.job_queue.name}/{job.share_name}",
            "user": job.submitted_by.username,
            "unit": job.capacity_unit.name,
            "queue": job.job_queue.name,
        }
        for group, key in keys.items():
            sums[group][key] += seconds
    return sums


def test_a_running_attempt_is_counted_up_to_now_when_the_period_ends_next_week(people, fleet, t0):
    big, _ = story.reclaimed(people, fleet, t0)  # big runs on, from t0 + 90 min
    before = timezone.now()
    report = reports.usage_report(t0, before + WEEK, "user", reports.Scope())
    after = timezone.now()
    open_since = JobAttempt.objects.get(job=big, number=2).started_at
    counted = by_key(report)["alice"]["instance_seconds"]
    assert 4 * 1800 + 4 * (before - open_since).total_seconds() - 0.01 <= counted
    assert counted <= 4 * 1800 + 4 * (after - open_since).total_seconds() + 0.01
    # Nor is a share entitled to its limit in hours that have not come yet.
    vision = by_key(reports.usage_report(t0, before + WEEK, "share", reports.Scope()))
    after = timezone.now()  # this report's own now comes later than the first one's
    entitled = vision["gpu/vision"]["entitled_instance_seconds"]
    assert entitled <= 2 * (after - t0).total_seconds() + 0.01


def test_a_finished_story_equals_its_attempts_for_any_window(people, fleet, t0):
    big, small = story.reclaimed(people, fleet, t0)
    services.finish_job(Job.objects.get(pk=big.pk), "SUCCEEDED", now=t0 + 2 * HOUR)
    rollup.roll_up(since=t0)  # some hours from the rows, the rest live
    now = timezone.now()
    windows = [
        (t0, t0 + 2 * HOUR),  # past
        (t0 + timedelta(minutes=15), now + timedelta(minutes=5)),  # ends five minutes ahead
        (t0 - HOUR, now + WEEK),  # ends next week
        (now - timedelta(minutes=30), now + HOUR),  # nothing ran in it
    ]
    for start, end in windows:
        expected = attempt_seconds(start, end)
        for group in reports.GROUPS:
            report = reports.usage_report(start, end, group, reports.Scope())
            counted = {k: r["instance_seconds"] for k, r in by_key(report).items()}
            counted = {k: v for k, v in counted.items() if v}
            assert counted == pytest.approx(dict(expected[group])), (start, end, group)


def test_rest_csv_page_and_chart_stop_at_now(people, fleet, t0):
    story.reclaimed(people, fleet, t0)
    now = timezone.now()
    end = (now + WEEK).isoformat()
    params = {"start": t0.isoformat(), "end": end, "group_by": "queue"}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens['ada']}")
    body = client.get("/api/v1/usage/", params).json()
    ran_for = (timezone.now() - t0).total_seconds()
    # Four instances at most were ever busy, and only up to now.
    assert body["totals"]["instance_seconds"] <= 4 * ran_for
    table = client.get("/api/v1/usage/", {**params, "format": "csv"}).content.decode()
    total = next(line for line in table.splitlines() if line.startswith("total,"))
    assert float(total.split(",")[1]) <= 4 * ran_for
    page = Client()
    page.force_login(people.admin)
    period = {"start": t0.isoformat()[:16], "end": end[:16], "group_by": "queue"}
    html = page.get("/usage/", period).content.decode()
    row = html[html.index('data-key="gpu"') :].split("</tr>")[0]
    gpus = fleet.vision.job_queue.service_environment.capacity_limits.get().capacity_unit
    gpu_hours = float(row.split('data-label="GPU-hours" class="num">')[1].split("<")[0])
    assert gpu_hours <= 4 * gpus.gpus_per_unit * ran_for / 3600 + 0.05
    buckets, series = reports.usage_series(
        t0, now + WEEK, "queue", reports.Scope(), timedelta(hours=1)
    )
    busy_after_now = [
        buckets[i] for i, seconds in enumerate(series["gpu"]["own"]) if seconds and buckets[i] > now
    ]
    assert busy_after_now == []


def test_prometheus_counts_no_seconds_ahead_of_now(client, settings, people, fleet, t0):
    settings.QP_METRICS_TOKEN, settings.QP_METRICS_ALLOWED_IPS = TOKEN, []
    story.reclaimed(people, fleet, t0)
    rollup.roll_up(since=t0)
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    labels = {"job_queue": "gpu", "quota_share": "vision", "team": "vision"}
    own = value(found, "quotaportal_usage_instance_seconds_total", **labels, kind="own")
    assert own <= 4 * (timezone.now() - t0).total_seconds()
