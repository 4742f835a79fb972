"""The SIMULATED backend: dispatched jobs run from the next tick and end after their
simulated duration; capacity is the environment's max_capacity."""

from __future__ import annotations

from datetime import timedelta

from quotaportal.quotas.backends import EnvironmentBackend
from quotaportal.quotas.models import DISPATCHED, Job, JobStatus
from quotaportal.quotas.services.lifecycle import progress_simulated


class SimulatedBackend(EnvironmentBackend):
    def advance(self, queue, now) -> None:
        progress_simulated(queue.id, now)

    def next_change(self, queue, now):
        """A dispatched job that has not started starts at the next tick (now); a running
        one ends when its simulated duration has passed."""
        soonest = None
        for status, started, seconds in Job.objects.filter(
            job_queue_id=queue.id, status__in=DISPATCHED
        ).values_list("status", "started_at", "simulated_duration_seconds"):
            if status != JobStatus.RUNNING or started is None:
                return now
            if seconds is not None:
                ends = started + timedelta(seconds=seconds)
                soonest = ends if soonest is None else min(soonest, ends)
        return soonest
