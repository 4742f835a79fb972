"""Immediate ticks coalesce: a burst of submits queues one tick per environment, and the next
change after that tick has started queues the next one."""

from __future__ import annotations

import os

import pytest
import redis

from quotaportal.quotas.services import ticks
from quotaportal.quotas.tasks import tick_queue
from tests.conftest import submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def enqueued(settings, monkeypatch):
    """The ticks sent to the broker, without a worker to run them."""
    settings.QP_IMMEDIATE_TICKS = True
    sent = []
    monkeypatch.setattr(tick_queue, "delay", sent.append)
    return sent


@pytest.mark.parametrize("shared_by", ["redis", "this process"])
def test_a_burst_of_submits_queues_one_tick_and_a_started_tick_lets_the_next_through(
    people, fleet, enqueued, settings, shared_by
):
    if shared_by == "redis":
        settings.REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
        redis.Redis.from_url(settings.REDIS_URL).delete(
            ticks._key(fleet.queue.service_environment_id)
        )
    else:
        settings.REDIS_URL = ""
    for i in range(30):
        submit(people.alice, fleet, name=f"burst-{i}")
    assert enqueued == [fleet.queue.pk], "30 submits, one queued tick"
    ticks.gate.release(fleet.queue.pk)  # what the task does first when a worker starts it
    submit(people.alice, fleet, name="after-the-tick-started")
    assert enqueued == [fleet.queue.pk, fleet.queue.pk]
    ticks.gate.release(fleet.queue.pk)


def test_a_broker_outage_leaves_no_claim_behind(people, fleet, settings, monkeypatch):
    settings.QP_IMMEDIATE_TICKS = True
    settings.REDIS_URL = ""

    def broken(queue_id):
        raise ConnectionError("broker down")

    monkeypatch.setattr(tick_queue, "delay", broken)
    submit(people.alice, fleet, name="during-outage")
    assert ticks.gate.claim(fleet.queue.pk), "the failed enqueue released its claim"
    ticks.gate.release(fleet.queue.pk)
