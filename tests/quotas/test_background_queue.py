"""Long tasks (estimates, full plans, what-ifs, the usage roll-up) go to a queue of their own,
so a worker started for the ticks never spends a process on them, and one started for the
long tasks takes them; a worker given neither option takes both."""

from __future__ import annotations

import re

import pytest
import redis
from django.conf import settings as dj_settings

from quotaportal.quotas.models import Job
from tests.builders import submit
from tests.workers import QUIET, TICK, deployment, wait_for, worker_with_beat

# Worker processes and brokers: the integration lane, not `make test-fast`.
pytestmark = pytest.mark.slow

ESTIMATES = "quotaportal.quotas.tasks.refresh_all_estimates"


def waiting(broker: str, queue: str) -> int:
    return redis.Redis.from_url(broker).llen(f"routed:celery:{queue}")


@pytest.mark.django_db(transaction=True)
def test_the_ticks_worker_leaves_the_long_tasks_to_the_background_worker(
    people, fleet, repo, tmp_path, broker
):
    job = submit(people.alice, fleet)
    app = deployment(broker)
    ticks_dir, background_dir = tmp_path / "ticks", tmp_path / "background"
    ticks_dir.mkdir(), background_dir.mkdir()
    with worker_with_beat(repo, ticks_dir, broker, "-X", "background", **QUIET) as (worker, _):
        app.send_task(ESTIMATES)
        app.send_task(TICK, args=[fleet.queue.pk])
        wait_for(worker, lambda: Job.objects.get(pk=job.pk).status != "RUNNABLE", 30)
        assert Job.objects.get(pk=job.pk).status in ("SCHEDULED", "RUNNING"), "ticks are its"
        assert waiting(broker, dj_settings.BACKGROUND_QUEUE) == 1, "the estimates wait"
        alive = redis.Redis.from_url(broker)
        assert alive.exists("routed:celery-worker-alive:celery"), "/healthz hears of the ticks"
        assert not alive.exists("routed:celery-worker-alive:background"), "nor of the rest"
    assert waiting(broker, dj_settings.BACKGROUND_QUEUE) == 1
    background = ("-Q", dj_settings.BACKGROUND_QUEUE)
    with worker_with_beat(repo, background_dir, broker, *background, **QUIET) as (worker, log):
        wait_for(worker, lambda: waiting(broker, dj_settings.BACKGROUND_QUEUE) == 0, 30)
    assert waiting(broker, dj_settings.BACKGROUND_QUEUE) == 0
    assert re.search(r"refresh_all_estimates\[[^]]+\] succeeded", log[0]), "it ran them"


@pytest.mark.django_db(transaction=True)
def test_a_worker_given_no_queue_takes_the_ticks_and_the_long_tasks(
    people, fleet, repo, tmp_path, broker
):
    job = submit(people.alice, fleet)
    app = deployment(broker)
    with worker_with_beat(repo, tmp_path, broker, **QUIET) as (worker, log):
        app.send_task(ESTIMATES)
        app.send_task(TICK, args=[fleet.queue.pk])
        wait_for(worker, lambda: Job.objects.get(pk=job.pk).status != "RUNNABLE", 30)
        wait_for(worker, lambda: waiting(broker, dj_settings.BACKGROUND_QUEUE) == 0, 30)
    assert Job.objects.get(pk=job.pk).status in ("SCHEDULED", "RUNNING")
    assert waiting(broker, dj_settings.BACKGROUND_QUEUE) == 0
    assert "refresh_all_estimates" in log[0]


def test_each_long_task_is_routed_to_the_background_queue_and_the_ticks_are_not(broker):
    from quotaportal.celery import app as portal

    assert set(dj_settings.CELERY_TASK_ROUTES) <= set(portal.tasks), "a route names no task"
    beat = {entry["task"] for entry in dj_settings.CELERY_BEAT_SCHEDULE.values()}
    assert beat <= set(portal.tasks), "beat would send a task no worker knows"
    router = deployment(broker).amqp.router
    long_tasks = (
        ESTIMATES,
        "quotaportal.quotas.tasks.plan_queues_fully",
        "quotaportal.quotas.tasks.run_what_if_task",
        "quotaportal.usage.tasks.roll_up_usage",
    )
    for name in long_tasks:
        assert router.route({}, name)["queue"].name == "background", name
    for name in (
        TICK,
        "quotaportal.quotas.tasks.tick_queue_at",
        "quotaportal.quotas.tasks.tick_queue",
    ):
        assert router.route({}, name)["queue"].name == "celery", name
