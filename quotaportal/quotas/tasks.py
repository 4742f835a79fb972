"""Celery tasks: thin wrappers that take ids and call the tick service."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from quotaportal.quotas.models import SchedulerRun, UtilizationSample
from quotaportal.quotas.services import estimates, whatif
from quotaportal.quotas.services.tick import run_tick, tickable_queue_ids
from quotaportal.quotas.services.ticks import gate


@shared_task(ignore_result=True)
def tick_queue(queue_id: int, immediate: bool = False, wait: bool = False) -> None:
    """A tick of the queue's environment: every beat period, at once after a change, or at
    the instant a reservation starts or ends (`wait`: never skipped for a tick in progress)."""
    if immediate:
        # Before reading anything: a change committed from now on must enqueue the next tick.
        gate.started(queue_id)
    run = run_tick(queue_id, wait=immediate or wait)
    if immediate and run is not None:
        gate.spaced(queue_id, run.duration_ms / 1000)


@shared_task(ignore_result=True)
def tick_all_queues() -> None:
    """Beat's periodic task: one tick task per queue, so several workers share the queues."""
    for queue_id in tickable_queue_ids():
        tick_queue.delay(queue_id)
    prune_history()


def prune_history() -> None:
    """Scheduler runs and utilization samples are kept for a day."""
    cutoff = timezone.now() - timedelta(hours=settings.QP_HISTORY_HOURS)
    SchedulerRun.objects.filter(started_at__lt=cutoff).delete()
    UtilizationSample.objects.filter(time__lt=cutoff).delete()


@shared_task(ignore_result=True)
def refresh_all_estimates() -> None:
    """Beat's task: start-time estimates of every queue with jobs waiting."""
    estimates.refresh_all_estimates()


@shared_task(ignore_result=True)
def run_what_if_task(what_if_id: str) -> None:
    """A what-if's two replays; progress goes to its row as they run."""
    whatif.run_what_if(what_if_id)
