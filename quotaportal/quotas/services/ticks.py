"""Marking a queue changed, and asking for a scheduler tick once the change has committed."""

from __future__ import annotations

import logging
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import F

from quotaportal.quotas.models import JobQueue

log = logging.getLogger(__name__)


def queue_changed(queue_id: int) -> None:
    """What the planner sees in this queue changed: bump its version and tick after commit.

    Every service that changes jobs, shares, capacity or queue settings calls this, so a tick
    can skip re-planning a queue whose version has not moved (see services.tick).
    """
    JobQueue.objects.filter(pk=queue_id).update(state_version=F("state_version") + 1)
    tick_after_commit(queue_id)


def tick_after_commit(queue_id: int) -> None:
    """After this transaction commits, enqueue an immediate tick of the queue (DESIGN.md §7)."""
    if not getattr(settings, "QP_IMMEDIATE_TICKS", True):
        return

    transaction.on_commit(partial(enqueue_tick, queue_id))


def enqueue_tick(queue_id: int) -> bool:
    """Ask a worker for a tick now. The change has committed already, so a broker outage must
    not fail the request: the next beat (or the embedded loop) ticks the queue anyway."""
    from quotaportal.quotas.tasks import tick_queue

    try:
        tick_queue.delay(queue_id)
    except Exception:  # the broker's errors vary by transport (redis, kombu, OSError)
        log.exception("could not enqueue a tick of queue %s; the next beat will tick it", queue_id)
        return False
    return True
