"""Asking for a scheduler tick once a change has committed."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction


def tick_after_commit(queue_id: int) -> None:
    """After this transaction commits, enqueue an immediate tick of the queue (DESIGN.md §7)."""
    if not getattr(settings, "QP_IMMEDIATE_TICKS", True):
        return

    def enqueue() -> None:
        from quotaportal.quotas.tasks import tick_queue

        tick_queue.delay(queue_id)

    transaction.on_commit(enqueue)
