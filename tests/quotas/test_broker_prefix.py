"""Two deployments on one Redis database keep apart by QP_REDIS_PREFIX, the broker's keys
included: a worker of one never takes a task the other sent."""

from __future__ import annotations

import time

import pytest
import redis
from celery import Celery

from quotaportal.quotas.models import Job
from tests.builders import submit
from tests.workers import wait_for, worker_with_beat

# Worker processes and brokers: the integration lane, not `make test-fast`.
pytestmark = pytest.mark.slow

TICK = "quotaportal.quotas.tasks.tick_queue_now"


def sender(broker: str, prefix: str) -> Celery:
    """A Celery app configured as a deployment with this prefix sends its tasks."""
    app = Celery(broker=broker, set_as_current=False)
    app.conf.broker_transport = "quotaportal.infra.broker:Transport"
    app.conf.broker_transport_options = {"global_keyprefix": f"{prefix}:celery:"}
    return app


@pytest.mark.django_db(transaction=True)
def test_a_worker_takes_only_its_own_deployments_tasks(people, fleet, repo, tmp_path, broker):
    job = submit(people.alice, fleet)
    settings = {"QP_TICK_SECONDS": "600", "QP_IMMEDIATE_TICKS": "0", "QP_REDIS_PREFIX": "mine"}
    with worker_with_beat(repo, tmp_path, broker, **settings) as (worker, _):
        other = sender(broker, "theirs")
        other.send_task(TICK, args=[fleet.queue.pk])
        time.sleep(5)  # the worker is up and listening long before this
        assert Job.objects.get(pk=job.pk).status == "RUNNABLE", "it took another's task"
        keys = [k.decode() for k in redis.Redis.from_url(broker).keys("*")]
        theirs = [k for k in keys if k.startswith("theirs:celery:")]
        assert "theirs:celery:celery" in theirs, keys  # still waiting for their worker
        stray = [k for k in keys if not k.startswith(("mine:", "theirs:", "quotaportal:claimed"))]
        assert stray == [], "every broker key carries its deployment's prefix"
        sender(broker, "mine").send_task(TICK, args=[fleet.queue.pk])
        wait_for(worker, lambda: Job.objects.get(pk=job.pk).status != "RUNNABLE", 30)
