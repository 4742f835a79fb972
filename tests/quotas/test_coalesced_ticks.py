"""Immediate ticks coalesce: a burst of submits queues one tick per environment, and the next
change after that tick has started queues the next one."""

from __future__ import annotations

import os
import time

import pytest
import redis

from quotaportal.quotas.tasks import tick_queue_now
from quotaportal.tick import requests as ticks
from tests.builders import submit

pytestmark = pytest.mark.django_db(transaction=True)

MS = 0.001  # Redis keeps a spacing to the millisecond


@pytest.fixture(params=["redis", "this process"])
def gate_store(request, settings, fleet):
    """Where the tick marks live: Redis (cleared of earlier tests' marks), or this process."""
    if request.param == "this process":
        settings.REDIS_URL = ""
        return
    settings.REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
    env_id = fleet.queue.service_environment_id
    redis.Redis.from_url(settings.REDIS_URL).delete(
        ticks._key(env_id), ticks._spacing_key(env_id), ticks._planned_key(env_id)
    )


@pytest.fixture
def enqueued(settings, monkeypatch):
    """The ticks sent to the broker, without a worker to run them."""
    settings.QP_IMMEDIATE_TICKS = True
    sent = []
    monkeypatch.setattr(tick_queue_now, "delay", lambda queue_id: sent.append(queue_id))
    return sent


def test_a_burst_of_submits_queues_one_tick_and_a_started_tick_lets_the_next_through(
    people, fleet, enqueued, gate_store
):
    for i in range(30):
        submit(people.alice, fleet, name=f"burst-{i}")
    assert enqueued == [fleet.queue.pk], "30 submits, one queued tick"
    ticks.gate.release(fleet.queue.pk)  # what the task does first when a worker starts it
    submit(people.alice, fleet, name="after-the-tick-started")
    assert enqueued == [fleet.queue.pk, fleet.queue.pk]
    ticks.gate.release(fleet.queue.pk)


@pytest.fixture
def sent_later(settings, monkeypatch):
    """Ticks sent with a countdown: (queue id, seconds)."""
    sent = []
    monkeypatch.setattr(
        tick_queue_now, "apply_async", lambda args, countdown: sent.append((args[0], countdown))
    )
    return sent


def test_a_change_soon_after_an_immediate_tick_waits_out_a_spacing_a_multiple_of_its_planning(
    people, fleet, enqueued, sent_later, gate_store
):
    """A burst against a big environment costs a few ticks a second, not one after another."""
    submit(people.alice, fleet, name="lone")
    assert enqueued == [fleet.queue.pk], "no tick before it: at once"
    ticks.gate.release(fleet.queue.pk)  # the worker starts it ...
    since = time.monotonic()
    ticks.gate.spaced(fleet.queue.pk, 0.05)  # ... and it planned for 50 ms
    submit(people.alice, fleet, name="right-after")
    waited = time.monotonic() - since
    assert enqueued == [fleet.queue.pk], "not at once"
    [(queue_id, countdown)] = sent_later
    assert queue_id == fleet.queue.pk
    spacing = ticks.TickGate.SPACING_FACTOR * 0.05
    assert spacing - waited - MS <= countdown <= spacing, "a multiple of the 50 ms it planned"
    submit(people.alice, fleet, name="meanwhile")
    assert len(sent_later) == 1, "the waiting tick covers it"
    ticks.gate.release(fleet.queue.pk)
    ticks.gate.spaced(fleet.queue.pk, 30.0)  # a tick that planned for half a minute
    submit(people.alice, fleet, name="after-a-slow-tick")
    assert 0.9 < sent_later[-1][1] <= ticks.TickGate.MAX_SPACING_SECONDS, "spacing is capped"
    ticks.gate.release(fleet.queue.pk)


def test_a_change_while_a_tick_runs_waits_out_that_tick_and_the_spacing_after_it(
    people, fleet, enqueued, sent_later, gate_store
):
    """In a burst nearly every change comes while a tick runs: it is spaced as if the tick
    takes as long as the last one, not sent to run right behind it."""
    submit(people.alice, fleet, name="first")
    ticks.gate.started(fleet.queue.pk)  # the first tick of the environment runs ...
    submit(people.alice, fleet, name="during-the-first")
    assert enqueued == [fleet.queue.pk] * 2, "no length known yet: at once"
    assert not sent_later
    ticks.gate.started(fleet.queue.pk)  # ... that one starts ...
    ticks.gate.spaced(fleet.queue.pk, 0.05)  # ... and plans for 50 ms
    since = time.monotonic()
    ticks.gate.started(fleet.queue.pk)  # the next one runs
    submit(people.alice, fleet, name="during-the-next")
    waited = time.monotonic() - since
    assert len(enqueued) == 2, "not at once"
    [(queue_id, countdown)] = sent_later
    assert queue_id == fleet.queue.pk
    running_and_spacing = (ticks.TickGate.SPACING_FACTOR + 1) * 0.05
    assert running_and_spacing - waited - MS <= countdown <= running_and_spacing
    ticks.gate.release(fleet.queue.pk)


def test_an_immediate_tick_task_asks_for_the_spacing_after_it(people, fleet, settings):
    settings.REDIS_URL = ""
    submit(people.alice, fleet, name="planned")
    tick_queue_now.apply(args=(fleet.queue.pk,))
    assert ticks.gate.claim(fleet.queue.pk) > 0, "the next tick waits a little"
    ticks.gate.release(fleet.queue.pk)


def test_a_broker_outage_leaves_no_claim_behind(people, fleet, settings, monkeypatch):
    settings.QP_IMMEDIATE_TICKS = True
    settings.REDIS_URL = ""

    def broken(queue_id):
        raise ConnectionError("broker down")

    monkeypatch.setattr(tick_queue_now, "delay", broken)
    submit(people.alice, fleet, name="during-outage")
    assert ticks.gate.claim(fleet.queue.pk) is not None, "the failed enqueue released its claim"
    ticks.gate.release(fleet.queue.pk)


def test_an_immediate_tick_waits_for_a_tick_in_progress_instead_of_skipping(people, fleet):
    """A beat tick that finds the lock held skips; an immediate one waits for it, so the change
    that asked for it is planned at once rather than at the next beat."""
    import threading

    from django.db import connection, transaction

    from quotaportal.infra.locks import try_lock_environment
    from quotaportal.tick.run import run_tick, run_tick_waiting

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
    waited = run_tick_waiting(fleet.queue.pk)
    holder.join(5)
    assert not waited.skipped
    job.refresh_from_db()
    assert job.status == "SCHEDULED"
