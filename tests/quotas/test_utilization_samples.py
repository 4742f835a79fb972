"""Ticks keep the utilization history: a sample when usage changes, and the last one repeated
once a minute so the chart reaches the present; never a sample per tick."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from quotaportal.quotas.models import JobQueue, TickMemo, UtilizationSample
from quotaportal.tick.run import run_tick
from tests.builders import submit


def history(queue) -> list[dict]:
    return list(
        UtilizationSample.objects.filter(job_queue=queue)
        .order_by("time")
        .values_list("used", flat=True)
    )


def test_a_sample_is_written_when_usage_changes_and_repeated_once_a_minute(people, fleet):
    now = timezone.now()
    submit(people.alice, fleet, name="one")
    run_tick(fleet.queue.pk, now)
    assert history(fleet.queue) == [{"vision": {"a100": 1}}]

    run_tick(fleet.queue.pk, now + timedelta(seconds=5))
    run_tick(fleet.queue.pk, now + timedelta(seconds=30))
    assert len(history(fleet.queue)) == 1, "usage did not change: no sample"

    run_tick(fleet.queue.pk, now + timedelta(seconds=61))
    assert history(fleet.queue) == [{"vision": {"a100": 1}}] * 2

    submit(people.alice, fleet, name="two")
    run_tick(fleet.queue.pk, now + timedelta(seconds=62))
    assert history(fleet.queue)[-1] == {"vision": {"a100": 2}}
    assert len(history(fleet.queue)) == 3


def test_the_queue_remembers_its_newest_sample(people, fleet):
    now = timezone.now()
    submit(people.alice, fleet)
    run_tick(fleet.queue.pk, now)
    queue = JobQueue.objects.get(pk=fleet.queue.pk)
    newest = UtilizationSample.objects.filter(job_queue=queue).latest("time")
    memo = TickMemo.objects.get(queue=queue)
    assert (memo.sampled_used, memo.sampled_at) == (newest.used, newest.time)
