"""The dashboard chart's windows, ticks, colours and the samples kept for it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from quotaportal.quotas.models import UtilizationSample
from quotaportal.quotas.services.pruning import prune_history
from quotaportal.tick.run import run_tick
from quotaportal.web.charts import MOST_POINTS, share_colours, thinned, time_ticks
from tests.builders import submit


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        (timedelta(minutes=15), ["−15 min", "−10 min", "−5 min", "now"]),
        (
            timedelta(hours=1),
            ["−60 min", "−50 min", "−40 min", "−30 min", "−20 min", "−10 min", "now"],
        ),
        (timedelta(hours=24), ["−24 h", "−20 h", "−16 h", "−12 h", "−8 h", "−4 h", "now"]),
        (timedelta(days=7), ["−7 d", "−6 d", "−5 d", "−4 d", "−3 d", "−2 d", "−1 d", "now"]),
    ],
)
def test_each_window_has_a_few_whole_ticks_ending_at_now(span, labels):
    ticks = time_ticks(span)
    assert [label for _, label in ticks] == labels
    assert ticks[-1][0] == 1.0


def test_a_week_of_samples_is_thinned_to_what_the_chart_can_draw():
    start = datetime(2026, 12, 1, tzinfo=UTC)
    samples = [
        SimpleNamespace(time=start + timedelta(seconds=2 * i), used={}) for i in range(300_000)
    ]
    kept = thinned(samples, start, timedelta(days=7))
    assert len(kept) <= MOST_POINTS
    assert kept[-1] is samples[-1], "what holds now is kept"


def test_a_share_keeps_its_colour_whatever_else_is_in_the_chart():
    assert share_colours(["nlp", "vision"])["vision"] == share_colours(["vision", "nlp"])["vision"]


@pytest.mark.django_db
def test_the_dashboard_draws_the_window_asked_for_with_the_cards_colours(people, fleet, client):
    submit(people.alice, fleet, name="a")
    run_tick(fleet.queue.id)
    client.force_login(people.alice)
    page = client.get("/?queue=gpu&window=7d").content.decode()
    assert "Instances in use, last 7 days" in page
    assert ">−3 d</text>" in page
    assert 'aria-current="true" data-window="7d"' in page
    assert "&amp;window=7d" in page, "the live refresh keeps the window"
    swatch = re.search(r'class="swatch" style="background: (#[0-9a-f]{6})"[^>]*></i>vision', page)
    area = re.search(r'<polygon fill="(#[0-9a-f]{6})"[^>]*><title>vision</title>', page)
    assert swatch[1] == area[1], "the share's card shows its colour in the chart"
    fallback = client.get("/?queue=gpu&window=1y").content.decode()
    assert "Instances in use, last hour" in fallback


@pytest.mark.django_db
def test_samples_older_than_an_hour_are_thinned_to_one_a_minute_and_a_week_is_kept(fleet, settings):
    now = timezone.now().replace(second=30, microsecond=0)
    times = [
        now - timedelta(days=8),  # past QP_CHART_HOURS: goes
        now - timedelta(hours=3, seconds=20),
        now - timedelta(hours=3, seconds=10),  # the last of its minute: stays
        now - timedelta(minutes=5, seconds=20),
        now - timedelta(minutes=5, seconds=10),  # within the hour: both stay
    ]
    for at in times:
        UtilizationSample.objects.create(job_queue=fleet.queue, time=at, used={})
    prune_history()
    kept = sorted(
        UtilizationSample.objects.filter(job_queue=fleet.queue).values_list("time", flat=True)
    )
    assert kept == times[2:]


@pytest.mark.parametrize(
    ("span_s", "labels"),
    [
        (86, ["0", "30 s", "1 min"]),
        (344, ["0", "2 min", "4 min"]),
        (3600, ["0", "15 min", "30 min", "45 min"]),
        (6000, ["0", "30 min", "1 h", "1 h 30 min"]),
        (90_000, ["0", "6 h", "12 h", "18 h"]),
    ],
)
def test_a_replay_s_time_ticks_fall_on_round_durations(span_s, labels):
    from quotaportal.web.charts import duration_ticks

    ticks = duration_ticks(span_s)
    assert [label for _, label in ticks] == labels
    assert all(at < span_s for at, _ in ticks)
