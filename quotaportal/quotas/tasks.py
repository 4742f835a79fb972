"""Celery tasks: thin wrappers that take ids and call the tick service."""

from __future__ import annotations

from celery import shared_task

from quotaportal.quotas.models import JobQueue, State
from quotaportal.quotas.services.tick import run_tick


@shared_task(ignore_result=True)
def tick_queue(queue_id: int) -> None:
    run_tick(queue_id)


@shared_task(ignore_result=True)
def tick_all_queues() -> None:
    """Beat's periodic task: one tick task per queue, so several workers share the queues."""
    for queue_id in JobQueue.objects.filter(state=State.ENABLED).values_list("id", flat=True):
        tick_queue.delay(queue_id)
