"""One scheduler tick of one job queue: snapshot, plan, check, apply, record.

Procedure (all in one transaction):
1. Take the queue's advisory lock; if another tick holds it, record a skipped run and stop.
2. Advance time-driven state: SIMULATED jobs start and end, attempts past their duration fail.
3. Load the snapshot, plan it, and check the plan against every invariant.
4. Apply the plan with conditional updates, then record a SchedulerRun.
An invariant breach rolls everything back and is recorded as the run's error.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction
from django.utils import timezone

from quotaportal.quotas import bridge
from quotaportal.quotas.locks import try_lock_queue
from quotaportal.quotas.models import Backend, JobQueue, SchedulerRun
from quotaportal.quotas.services.lifecycle import enforce_attempt_timeouts, progress_simulated
from scheduler import InvariantViolation, check_plan, plan_tick

log = logging.getLogger(__name__)


def run_tick(queue_id: int, now=None) -> SchedulerRun:
    now = now or timezone.now()
    started = time.perf_counter()
    try:
        with transaction.atomic():
            queue = JobQueue.objects.select_related("service_environment").get(pk=queue_id)
            if not try_lock_queue(queue_id):
                return SchedulerRun.objects.create(job_queue=queue, started_at=now, skipped=True)
            dispatched, preempted = _tick_locked(queue, now)
            return SchedulerRun.objects.create(
                job_queue=queue,
                started_at=now,
                dispatched=dispatched,
                preempted=preempted,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
    except InvariantViolation as err:
        log.error("tick of queue %s produced an invalid plan, nothing applied: %s", queue_id, err)
        return SchedulerRun.objects.create(
            job_queue_id=queue_id,
            started_at=now,
            error=f"invalid plan, nothing applied: {err}",
            duration_ms=(time.perf_counter() - started) * 1000,
        )


def _tick_locked(queue: JobQueue, now) -> tuple[int, int]:
    backend = queue.service_environment.backend
    if backend == Backend.SIMULATED:
        progress_simulated(queue.id, now)
    enforce_attempt_timeouts(queue.id, now)
    loaded = bridge.load_snapshot(queue)
    plan = plan_tick(loaded.snapshot, now.timestamp())
    check_plan(loaded.snapshot, plan)
    return bridge.apply_plan(queue, loaded, plan, now)
