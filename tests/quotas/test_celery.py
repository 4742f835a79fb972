"""A real Celery worker with beat, on the machine's Redis, dispatches a job with no manual tick;
and ends a SIMULATED job at its instant rather than at the next beat."""

from __future__ import annotations

import pytest
from celery import Celery
from django.conf import settings as dj_settings

from quotaportal.quotas.models import Job, SchedulerRun
from tests.builders import submit
from tests.workers import wait_for, worker_with_beat

# Worker processes and brokers: the integration lane, not `make test-fast`.
pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_worker_with_beat_dispatches_a_submitted_job(people, fleet, repo, tmp_path, broker):
    settings = {"QP_TICK_SECONDS": "1", "QP_IMMEDIATE_TICKS": "0"}
    with worker_with_beat(repo, tmp_path, broker, **settings) as (worker, log):
        job = submit(people.alice, fleet)
        wait_for(worker, lambda: Job.objects.get(pk=job.pk).status != "RUNNABLE", 60)
        assert Job.objects.get(pk=job.pk).status in ("SCHEDULED", "RUNNING")
        assert SchedulerRun.objects.filter(job_queue=fleet.queue, dispatched=1).exists()
    assert "tick_all_queues" in log[0]


@pytest.mark.django_db(transaction=True)
def test_a_simulated_job_starts_and_ends_at_its_instants_not_at_the_next_beat(
    people, fleet, repo, tmp_path, broker
):
    """The beat comes every 60 s; one tick is sent by hand (as a submit would send it). The job
    starts at the tick after its dispatch and ends when its 2 s have passed, each by a tick the
    worker asked for at that instant."""
    job = submit(people.alice, fleet, name="two-seconds", simulated_duration_seconds=2)
    settings = {"QP_TICK_SECONDS": "60", "QP_IMMEDIATE_TICKS": "1"}
    with worker_with_beat(repo, tmp_path, broker, **settings) as (worker, _):
        deployment = Celery(broker=broker, set_as_current=False)
        deployment.conf.broker_transport_options = dj_settings.CELERY_BROKER_TRANSPORT_OPTIONS
        deployment.send_task("quotaportal.quotas.tasks.tick_queue_now", args=[fleet.queue.pk])
        wait_for(worker, lambda: Job.objects.get(pk=job.pk).status == "SUCCEEDED", 40)
    job.refresh_from_db()
    assert job.status == "SUCCEEDED", "ended long before the second beat"
    assert (job.started_at - job.scheduled_at).total_seconds() < 10
    ran = (job.stopped_at - job.started_at).total_seconds()
    assert 2 <= ran < 10, f"ended {ran:.2f} s after it started, not at its 2 s"
