"""An in-process scheduler loop: ticks every enabled queue every few seconds, in a thread.

For the embedded default (no Redis, no Celery) and for browser tests. Production runs the
Celery beat + worker pair instead; both call the same tick service.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from quotaportal.quotas.services import reservations
from quotaportal.quotas.services.pruning import prune_history
from quotaportal.tick import full_plan, requests
from quotaportal.tick.run import run_tick, tickable_queue_ids
from quotaportal.whatif import estimates

log = logging.getLogger(__name__)


class SchedulerLoop(threading.Thread):
    def __init__(self, period: float = 2.0):
        super().__init__(name="quotaportal-scheduler", daemon=True)
        self.period = period
        self._stop_event = threading.Event()

    PRUNE_SECONDS = 1200.0  # between prunings of old runs and samples

    def run(self) -> None:
        # By the clock, not by turns: a turn may be short when a tick is due sooner.
        pruned = estimated = fully_planned = float("-inf")
        try:
            while not self._stop_event.is_set():
                self.tick_all()
                if time.monotonic() - fully_planned >= settings.QP_FULL_PLAN_CHECK_SECONDS:
                    self.plan_fully()
                    fully_planned = time.monotonic()
                if time.monotonic() - pruned >= self.PRUNE_SECONDS:
                    prune_history()
                    pruned = time.monotonic()
                if time.monotonic() - estimated >= settings.QP_ESTIMATE_SECONDS:
                    self.refresh_estimates()
                    estimated = time.monotonic()
                self._stop_event.wait(self.pause())
        finally:
            connection.close()

    def pause(self) -> float:
        """The period, or less when a reservation starts or ends sooner (capacity changes at
        that instant) or a tick asked to run sooner (a SIMULATED job ends then): the tick
        must not wait a whole period to notice."""
        asked = requests.next_local_wake()
        try:
            upcoming = reservations.next_capacity_change()
        except Exception:  # a database hiccup must not stop the loop; it ticks on its period
            log.exception("could not read upcoming reservations")
            upcoming = None
        soonest = min((t for t in (asked, upcoming) if t is not None), default=None)
        if soonest is None:
            return self.period
        return max(0.0, min(self.period, (soonest - timezone.now()).total_seconds()))

    def tick_all(self) -> None:
        close_old_connections()
        for queue_id in tickable_queue_ids():
            try:
                run_tick(queue_id)
            except Exception:  # a failing tick must not stop the loop; it is logged and retried
                log.exception("tick of queue %s failed", queue_id)

    def plan_fully(self) -> None:
        try:
            full_plan.plan_due_queues()
        except Exception:  # the ticks plan fully themselves when this does not come
            log.exception("full plans failed")

    def refresh_estimates(self) -> None:
        try:
            estimates.refresh_paced()
        except Exception:  # estimates are a hint; the loop goes on without them
            log.exception("start-time estimates failed")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_event.set()
        self.join(timeout)
