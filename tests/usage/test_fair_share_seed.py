"""A fair-share policy switched on starts from the usage rows: each hour decayed from its
middle, borrowed or all use as the policy counts, day and week rows never counted twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from quotaportal.usage.fairness import seed
from quotaportal.usage.models import DAY, HOUR, UsageHour
from tests.builders import fair_borrowers

pytestmark = pytest.mark.django_db
H = 3600


def row(share: str, hours_ago: int, *, span=HOUR, used=H, borrowed=0.0, queue="gpu"):
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours_ago)
    UsageHour.objects.create(
        hour=hour, span=span, job_queue=queue, quota_share=share, team="vision", user="alice",
        unit="a100", instance_seconds=used, borrowed_instance_seconds=borrowed,
    )  # fmt: skip
    return hour


def test_each_hour_decays_from_its_middle(people):
    queue = fair_borrowers(people.admin)
    hour = row("vision", 3, used=4 * H, borrowed=2 * H)
    now = hour + timedelta(hours=1, minutes=30)  # an hour after the row's middle
    assert seed(queue, H, "borrowed", now) == {"vision": pytest.approx(H)}
    assert seed(queue, H, "all", now) == {"vision": pytest.approx(2 * H)}


def test_rows_of_other_queues_day_rows_and_the_far_past_are_not_read(people):
    queue = fair_borrowers(people.admin)
    row("vision", 5, borrowed=H, queue="elsewhere")
    row("vision", 24, borrowed=24 * H, span=DAY)  # the same hours summed again
    row("speech", 100, borrowed=H)  # 100 hours ago: more than 8 half-lives of 1 hour
    row("speech", 2, borrowed=H)
    found = seed(queue, H, "borrowed", timezone.now())
    assert set(found) == {"speech"}
    assert 0.17 * H < found["speech"] < 0.36 * H  # its middle 1.5 to 2.5 half-lives ago
