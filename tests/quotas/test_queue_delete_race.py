"""Deleting a job queue while its environment ticks answers 204 or 409, never a 500, and
keeps the queue's audit events, naming it. Real PostgreSQL, a real ticking thread."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, JobQueue, SchedulerRun
from quotaportal.tick.records import record_skip
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)


def tick_until(stop: threading.Event, queue_id: int, errors: list) -> None:
    try:
        while not stop.is_set():
            if not JobQueue.objects.filter(pk=queue_id).exists():
                return
            run_tick(queue_id)
    except Exception as err:  # a tick of a queue deleted under it may fail; record it
        errors.append(err)
    finally:
        connection.close()


@pytest.mark.postgresql
def test_a_queue_deleted_while_it_ticks_is_a_204_or_a_409_and_its_events_stay(people):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens['ada']}")
    answers = []
    for round_number in range(8):
        unit = f"u{round_number}"
        env, queue = build_queue(people.admin, unit=unit, env_name=f"e{round_number}")
        share = add_share(people.admin, queue, "brief", "vision", 1, "LEND", unit=unit)
        services.update_share(people.admin, share, state="DISABLED")
        services.delete_share(people.admin, share)
        events_before = Event.objects.filter(job_queue=queue).count()
        assert events_before, "the share's story is in the queue's audit log"
        stop, errors = threading.Event(), []
        ticker = threading.Thread(target=tick_until, args=(stop, queue.pk, errors))
        ticker.start()
        answer = api.delete("/api/v1/job-queues/gpu/")
        while answer.status_code == 409:
            answers.append(409)
            assert "being scheduled right now" in answer.json()["detail"]
            answer = api.delete("/api/v1/job-queues/gpu/")
        stop.set()
        ticker.join(30)
        answers.append(answer.status_code)
        assert answer.status_code == 204, answer.content
        kept = Event.objects.filter(detail__job_queue="gpu", job_queue=None)
        assert kept.count() >= events_before, "the queue's events outlived it"
        assert Event.objects.filter(
            kind=EventKind.RESOURCE_CHANGED, detail__action="deleted", detail__name="gpu"
        ).exists()
        services.delete_resource(people.admin, env, "service environment")
        services.delete_resource(people.admin, queue.scheduling_policy, "scheduling policy")
    assert set(answers) <= {204, 409}


def test_a_skip_record_of_a_deleted_queue_is_none_and_the_callers_transaction_goes_on(people):
    _, queue = build_queue(people.admin, unit="u", env_name="e")
    gone = JobQueue.objects.order_by("-pk").values_list("pk", flat=True).first() + 1
    with transaction.atomic():
        assert record_skip(gone, timezone.now()) is None
        assert record_skip(queue.pk, timezone.now()) is not None
    # The caller's commit went through: the deleted queue's record was never kept.
    skipped = SchedulerRun.objects.filter(skipped=True).values_list("job_queue_id", flat=True)
    assert list(skipped) == [queue.pk]
