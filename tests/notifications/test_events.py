"""Job events as AWS Batch's EventBridge events, delivered to a real HTTP listener, signed."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from quotaportal.notifications import outbox, sending, services
from quotaportal.notifications.models import Delivery, DeliveryStatus
from quotaportal.notifications.tasks import deliver_round
from quotaportal.quotas.models import Event
from tests.builders import submit
from tests.notifications.builders import borrow_then_reclaim, timeline

STATE = "Batch Service Job State Change"
STARTED = "Batch Service Job Preemption Started"
COMPLETED = "Batch Service Job Preemption Completed"


@pytest.mark.django_db
def test_a_preemption_reaches_the_webhook_as_started_completed_and_state_changes_signed(
    people, fleet, listener, webhook
):
    own, borrower, reclaimer = borrow_then_reclaim(people, fleet)
    deliver_round()

    events = listener.events()
    assert timeline(events, borrower) == [
        (STATE, "RUNNABLE"),
        (STATE, "SCHEDULED"),
        (STATE, "RUNNING"),
        (STARTED, "RUNNING"),  # AWS: the victim is RUNNING while its preemption starts
        (STATE, "RUNNABLE"),
        (COMPLETED, "RUNNABLE"),
    ]
    assert timeline(events, reclaimer) == [(STATE, "RUNNABLE"), (STATE, "SCHEDULED")]
    assert all(listener.signed_correctly(r) for r in listener.received)
    started = next(e for e in events if e["detail-type"] == STARTED)
    assert started["source"] == "aws.batch"
    assert started["detail"]["statusReason"].startswith(
        "PREEMPTION_IN_PROGRESS: Cross-share preemption"
    )
    assert started["detail"]["preemptedJobArn"].endswith(f"service-job/{borrower.pk}")
    completed = next(e for e in events if e["detail-type"] == COMPLETED)
    assert completed["detail"]["preemptionSummary"]["preemptedAttemptCount"] == 1
    change = next(e for e in events if e["detail-type"] == STATE)
    assert set(change) == {
        "version",
        "id",
        "detail-type",
        "source",
        "account",
        "time",
        "region",
        "resources",
        "detail",
    }
    detail = change["detail"]
    assert detail["jobName"] == "own"
    assert detail["jobQueue"].endswith("job-queue/gpu")
    assert detail["shareIdentifier"] == "vision"
    assert detail["quotaShareName"] == "vision"
    assert "tags" not in detail
    assert "serviceRequestPayload" not in detail


@pytest.mark.django_db
def test_every_delivery_is_logged_and_the_outbox_is_emptied(people, fleet, listener, webhook):
    borrow_then_reclaim(people, fleet)
    deliver_round()
    assert not Event.objects.filter(published=False).exists()
    log = Delivery.objects.filter(webhook=webhook)
    assert log.count() == len(listener.received) > 0
    assert set(log.values_list("status", flat=True)) == {DeliveryStatus.DELIVERED}
    assert set(log.values_list("response_status", flat=True)) == {204}
    ids = [r["headers"]["X-Quotaportal-Delivery"] for r in listener.received]
    assert ids == [str(pk) for pk in log.order_by("id").values_list("id", flat=True)], "in order"


@pytest.mark.django_db
def test_a_refused_delivery_is_retried_with_backoff_and_holds_back_the_rest(
    people, fleet, listener, webhook
):
    listener.answer = 500
    submit(people.alice, fleet, name="first")
    submit(people.alice, fleet, name="second")
    deliver_round()
    assert len(listener.received) == 1, "the second waits behind the first"
    head = Delivery.objects.filter(webhook=webhook).order_by("id").first()
    assert head.status == DeliveryStatus.PENDING
    assert head.tries == 1
    assert head.response_status == 500
    assert head.error.startswith("HTTP 500")
    assert head.next_try_at > timezone.now()
    deliver_round()
    assert len(listener.received) == 1, "not before its backoff has passed"

    listener.answer = 200
    Delivery.objects.filter(pk=head.pk).update(next_try_at=timezone.now())
    deliver_round()
    names = [e["detail"]["jobName"] for e in listener.events()]
    assert names == ["first", "first", "second"], "the head again, then the rest, in order"
    assert listener.received[0]["json"]["id"] == listener.received[1]["json"]["id"], (
        "a retry carries the same event id, so the receiver can drop the duplicate"
    )


def test_backoff_doubles_up_to_its_ceiling(settings):
    settings.QP_WEBHOOK_MAX_BACKOFF = 60
    assert [sending.backoff(n).total_seconds() for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


@pytest.mark.django_db
def test_a_delivery_refused_past_its_retry_window_is_given_up_and_the_next_goes(
    people, fleet, listener, webhook, settings
):
    listener.answer = 410
    submit(people.alice, fleet, name="doomed")
    outbox.publish()
    Delivery.objects.update(created_at=timezone.now() - timedelta(hours=25))
    submit(people.alice, fleet, name="next")
    deliver_round()
    doomed = Delivery.objects.order_by("id").first()
    assert doomed.status == DeliveryStatus.GAVE_UP
    assert doomed.tries == 1
    listener.answer = 200
    deliver_round()
    assert [e["detail"]["jobName"] for e in listener.events()] == ["doomed", "next"]


@pytest.mark.django_db
def test_a_listener_that_is_down_gets_every_event_once_it_is_back(people, fleet, listener, webhook):
    listener.stop()
    jobs = [submit(people.alice, fleet, name=f"j{i}") for i in range(3)]
    deliver_round()
    head = Delivery.objects.order_by("id").first()
    assert head.status == DeliveryStatus.PENDING
    assert "ConnectionError" in head.error
    listener.start()  # the same port
    Delivery.objects.update(next_try_at=timezone.now())
    deliver_round()
    assert [e["detail"]["jobName"] for e in listener.events()] == [j.name for j in jobs]


@pytest.mark.django_db
def test_filters_pick_event_types_queues_and_teams(people, fleet, listener):
    services.create_webhook(
        people.admin,
        name="nlp-preemptions",
        url=listener.url,
        secret="x" * 16,
        detail_types=[STARTED],
        teams=["vision"],
    )
    borrow_then_reclaim(people, fleet)
    deliver_round()
    assert [e["detail-type"] for e in listener.events()] == [STARTED], (
        "vision's preemption only; no state changes, nothing of nlp's"
    )


@pytest.mark.django_db
def test_a_slack_webhook_gets_a_message_with_a_link(people, fleet, listener):
    services.create_webhook(
        people.admin,
        name="slack",
        url=listener.url,
        secret="x" * 16,
        format="slack",
        detail_types=[STARTED],
    )
    _, borrower, _ = borrow_then_reclaim(people, fleet)
    deliver_round()
    (message,) = listener.events()
    text = message["text"]
    assert text.startswith("*Job borrower (queue gpu, share vision) was preempted*")
    assert "PREEMPTION_IN_PROGRESS" in text
    assert f"/jobs/{borrower.pk}/|Open the job>" in text


@pytest.mark.django_db
def test_a_disabled_webhook_gets_nothing_and_no_audience_costs_no_delivery(
    people, fleet, listener, webhook
):
    services.update_webhook(people.admin, webhook, enabled=False)
    submit(people.alice, fleet)
    assert outbox.publish() > 0
    assert not Delivery.objects.exists()
    deliver_round()
    assert listener.received == []


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_servers_sender_delivers_after_each_commit(
    people, fleet, listener, webhook, settings, monkeypatch
):
    """The embedded default: no Celery worker, the demo's sender thread is woken by the commit
    (its sweep is an hour away, so only the commit's wake can explain a delivery)."""
    from quotaportal.notifications import tasks

    settings.QP_NOTIFY_AFTER_COMMIT = True
    settings.QP_NOTIFY_SWEEP_SECONDS = 3600
    monkeypatch.setitem(tasks.deliver_notifications.app.conf, "task_always_eager", True)
    sender = tasks.start_in_process()
    try:
        job = submit(people.alice, fleet, name="embedded")
        deadline = time.monotonic() + 10
        while not listener.received and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sender.stop()
        monkeypatch.setattr(tasks, "_in_process", None)
    assert [e["detail"]["jobName"] for e in listener.events()] == [job.name]
