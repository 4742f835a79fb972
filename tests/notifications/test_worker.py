"""The whole asynchronous path with real processes: a Celery worker with its beat delivers job
events to a real HTTP listener that is down for a minute, while workers are killed with
SIGKILL at any moment. Every event arrives once the listener is back, in order, signed; a
killed worker loses none (one may be sent twice: at least once)."""

from __future__ import annotations

import time

import pytest

from quotaportal.notifications import services
from quotaportal.notifications.models import Delivery, DeliveryStatus
from quotaportal.quotas.models import Event, Job
from tests.builders import submit
from tests.notifications.builders import about_job
from tests.workers import kill_hard, worker_with_beat

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "worker-test-secret-0123"
OUTAGE_SECONDS = 60
SETTINGS = {
    "QP_TICK_SECONDS": "1",
    "QP_IMMEDIATE_TICKS": "1",
    "QP_NOTIFY_SWEEP_SECONDS": "1",
    "QP_WEBHOOK_MAX_BACKOFF": "4",
    "QP_WEBHOOK_TIMEOUT": "2",
}


def until(condition, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def folder(tmp_path, name: str):
    made = tmp_path / name
    made.mkdir()
    return made


def status(job) -> str:
    return Job.objects.get(pk=job.pk).status


def test_a_listener_down_for_a_minute_and_killed_workers_lose_no_event(
    people, fleet, repo, tmp_path, broker, listener
):
    listener.secret = SECRET
    hook = services.create_webhook(people.admin, name="ops", url=listener.url, secret=SECRET)
    listener.stop()
    down_since = time.monotonic()
    with worker_with_beat(repo, folder(tmp_path, "a"), broker, **SETTINGS) as (first, _):
        own = submit(people.alice, fleet, name="own", quantity=2)
        borrower = submit(people.alice, fleet, name="borrower", quantity=2)
        until(lambda: status(borrower) == "RUNNING", "the borrower to run", 30)
        submit(
            people.bob,
            fleet,
            share="nlp",
            name="reclaimer",
            quantity=2,
            simulated_duration_seconds=3,
        )
        until(lambda: Job.objects.get(pk=borrower.pk).preempted_count == 1, "the preemption", 30)
        until(
            lambda: Delivery.objects.filter(webhook=hook, tries__gte=2).exists(),
            "tries against the closed port",
            30,
        )
        kill_hard(first)  # while it retries the head
    with worker_with_beat(repo, folder(tmp_path, "b"), broker, **SETTINGS) as (second, _):
        until(lambda: status(borrower) == "RUNNING", "the borrower to run again", 60)
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_since)))
        head = Delivery.objects.filter(webhook=hook).order_by("id").first()
        assert head.status == DeliveryStatus.PENDING, "nothing got through the outage"
        assert "ConnectionError" in head.error
        listener.delay = 0.3  # slow answers: the next kill lands mid-delivery
        listener.start()
        until(lambda: len(listener.received) >= 3, "deliveries to resume", 30)
        kill_hard(second)  # mid-delivery: the listener answers slowly
    assert status(own) == "RUNNING", "own runs on, within its share"
    with worker_with_beat(repo, folder(tmp_path, "c"), broker, **SETTINGS):
        until(
            lambda: (
                not Event.objects.filter(published=False).exists()
                and not Delivery.objects.filter(
                    webhook=hook, status=DeliveryStatus.PENDING
                ).exists()
            ),
            "every delivery to be accepted",
            90,
        )

    made = [d.body for d in Delivery.objects.filter(webhook=hook).order_by("id")]
    received = [r["body"].decode() for r in listener.received]
    assert list(dict.fromkeys(received)) == made, "each delivery, in the order made"
    assert not Delivery.objects.filter(status=DeliveryStatus.GAVE_UP).exists()
    assert all(listener.signed_correctly(r) for r in listener.received)
    kinds = about_job(made, borrower)
    assert kinds[:6] == [
        ("Batch Service Job State Change", "RUNNABLE"),
        ("Batch Service Job State Change", "SCHEDULED"),
        ("Batch Service Job State Change", "RUNNING"),
        ("Batch Service Job Preemption Started", "RUNNING"),
        ("Batch Service Job State Change", "RUNNABLE"),
        ("Batch Service Job Preemption Completed", "RUNNABLE"),
    ]


def test_a_worker_killed_mid_delivery_counts_the_try_and_resends_on_schedule(
    people, fleet, repo, tmp_path, broker, listener
):
    """The listener takes 20 s to answer; the worker is killed while it waits. The try is
    counted, and the next worker sends the event again after its backoff, not once the dead
    sender's hold on the webhook has run out (minutes with a 30 s timeout)."""
    listener.secret = SECRET
    hook = services.create_webhook(people.admin, name="ops", url=listener.url, secret=SECRET)
    listener.delay = 20
    slow = {**SETTINGS, "QP_WEBHOOK_TIMEOUT": "30", "QP_WEBHOOK_MAX_BACKOFF": "2"}
    with worker_with_beat(repo, folder(tmp_path, "a"), broker, **slow) as (first, _):
        submit(people.alice, fleet, name="watched")
        until(lambda: len(listener.received) == 1, "the first try to reach the listener", 60)
        kill_hard(first)
    killed_at = time.monotonic()
    head = Delivery.objects.filter(webhook=hook).order_by("id").first()
    assert head.tries == 1, "the try the killed worker was making is counted"
    listener.delay = 0
    with worker_with_beat(repo, folder(tmp_path, "b"), broker, **slow):
        until(lambda: len(listener.received) >= 2, "the event to be sent again", 60)
        again_after = time.monotonic() - killed_at
        until(
            lambda: Delivery.objects.get(pk=head.pk).status == DeliveryStatus.DELIVERED,
            "the delivery to be accepted",
            30,
        )
    assert listener.received[1]["body"] == listener.received[0]["body"], "the same event again"
    # A worker's start (a few seconds) and one sweep: far inside the 128 s a lease held.
    assert again_after < 30, f"sent again {again_after:.0f} s after the kill"
    assert Delivery.objects.get(pk=head.pk).tries == 2
