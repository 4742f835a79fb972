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
    monkeypatch.setattr(tick_queue, "delay", lambda queue_id, immediate: sent.append(queue_id))
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

    def broken(queue_id, immediate):
        raise ConnectionError("broker down")

    monkeypatch.setattr(tick_queue, "delay", broken)
    submit(people.alice, fleet, name="during-outage")
    assert ticks.gate.claim(fleet.queue.pk), "the failed enqueue released its claim"
    ticks.gate.release(fleet.queue.pk)


def test_an_immediate_tick_waits_for_a_tick_in_progress_instead_of_skipping(people, fleet):
    """A beat tick that finds the lock held skips; an immediate one waits for it, so the change
    that asked for it is planned at once rather than at the next beat."""
    import threading

    from django.db import connection, transaction

    from quotaportal.quotas.locks import try_lock_environment
    from quotaportal.quotas.services import run_tick

    job = submit(people.alice, fleet, name="waits-for-the-lock")
    holding, release = threading.Event(), threading.Event()

    def hold_the_lock():
        with transaction.atomic():
            try_lock_environment(fleet.queue.service_environment_id)
            holding.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    holding.wait(5)
    assert run_tick(fleet.queue.pk).skipped, "a beat tick skips while the lock is held"
    threading.Timer(0.3, release.set).start()
    waited = run_tick(fleet.queue.pk, wait=True)
    holder.join(5)
    assert not waited.skipped
    job.refresh_from_db()
    assert job.status == "SCHEDULED"
