"""The SIMULATED backend: dispatched jobs run from the next tick and end after their
simulated duration; capacity is the environment's max_capacity."""

from __future__ import annotations

from datetime import timedelta

from quotaportal.jobs.transitions import (
    NOT_YET_RUNNING,
    mark_started_in_bulk,
    succeed_in_bulk,
)
from quotaportal.quotas.backends import EnvironmentBackend
from quotaportal.quotas.models import DISPATCHED, Job, JobStatus


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


def progress_simulated(queue_id: int, now) -> None:
    """SIMULATED backend: dispatched jobs run from the next tick and end after their duration.

    It runs inside the tick, which plans the freed capacity right after: no other tick is
    asked for (the backend asks for one at its next start or end instead). One read of the
    queue's dispatched jobs finds both, as every tick of a replay makes it."""
    starting, due = [], []
    for pk, status, scheduled, started, seconds in Job.objects.filter(
        job_queue_id=queue_id, status__in=DISPATCHED
    ).values_list("id", "status", "scheduled_at", "started_at", "simulated_duration_seconds"):
        if status in NOT_YET_RUNNING:
            if scheduled is not None and scheduled < now:
                starting.append(pk)
        elif None not in (seconds, started) and started + timedelta(seconds=seconds) <= now:
            due.append(pk)
    mark_started_in_bulk(dict.fromkeys(starting, now))
    if due:
        succeed_in_bulk(due, SIMULATED_DONE, now)


SIMULATED_DONE = "Simulated run completed"
