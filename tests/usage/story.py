"""A usage story run through the real tick at chosen times, for the ledger's tests and the
usage page's."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from quotaportal.usage import rollup
from tests.builders import submit


def hours_ago(hours: int):
    return rollup.floor_hour(timezone.now()) - timedelta(hours=hours)


def submitted(user, fleet, at, **fields):
    job = submit(user, fleet, **fields)
    Job.objects.filter(pk=job.pk).update(created_at=at)  # as if submitted then
    return job


def tick(fleet, at):
    run_tick(fleet.queue.id, now=at)


def reclaimed(people, fleet, t0):
    """4 a100; vision (LEND_AND_BORROW, limit 2) runs a 4-instance job from t0; nlp (LEND,
    limit 2) takes its 2 back at t0 + 30 min; nlp's job ends at t0 + 90 min and the big one
    starts again, alone, to run on."""
    big = submitted(people.alice, fleet, t0, name="big", quantity=4)
    tick(fleet, t0)
    tick(fleet, t0 + timedelta(seconds=60))
    small = submitted(
        people.bob, fleet, t0 + timedelta(minutes=30), share="nlp", name="n1", quantity=2
    )
    tick(fleet, t0 + timedelta(minutes=30))
    assert Job.objects.get(pk=big.pk).status == "RUNNABLE"
    tick(fleet, t0 + timedelta(minutes=31))
    services.finish_job(Job.objects.get(pk=small.pk), "SUCCEEDED", now=t0 + timedelta(minutes=90))
    tick(fleet, t0 + timedelta(minutes=90))
    assert Job.objects.get(pk=big.pk).status == "SCHEDULED"
    return big, small
