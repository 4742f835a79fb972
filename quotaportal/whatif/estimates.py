"""Estimated start times of RUNNABLE jobs: a forward simulation of the queue from now.

Running jobs end after their expected remaining time and waiting jobs run for their expected
duration (scheduler.simulate.estimate.Durations: a SIMULATED job's own duration, else the
median of recent jobs of the same share and size capped by the job's time limit, ...). The
result is stored on each RUNNABLE job; the beat (or the embedded loop) refreshes it every
QP_ESTIMATE_SECONDS. The cost per queue is bounded whatever its length: it reads the
dispatched jobs and at most QP_ESTIMATE_MAX_WAITING waiting ones, in the order the queue serves
them (bridge.fronts, one index range), and simulates a bounded number of events.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from quotaportal.infra import redis_client
from quotaportal.infra.bulk import update_rows
from quotaportal.infra.locks import lock_environment, session_lock
from quotaportal.quotas import selectors
from quotaportal.quotas.models import Job, JobQueue, JobStatus, State
from quotaportal.tick import bridge
from scheduler import Ordering
from scheduler.simulate import QueueConfig, WorkJob
from scheduler.simulate.estimate import (
    ARRIVAL_WINDOW_S,
    ASSUMPTION,
    Durations,
    Estimate,
    estimate_ranges,
    quantile_scenarios,
    scenarios_with_arrivals,
)

log = logging.getLogger(__name__)

HISTORY = 500  # finished jobs per queue the expected durations are taken from
STORE_LOCK_SECONDS = 2.0  # how long the write waits for a tick of the environment to end

__all__ = ["ASSUMPTION", "refresh_all_estimates", "refresh_estimates", "refresh_paced"]

# One paced refresh at a time across all workers, and a process that ran one for D seconds
# starts none for REST_FACTOR x D: estimates hold at most one worker process at a time and
# about a tenth of the workers' time however big the queues, and the ticks keep the rest.
# (Refreshes back to back on both worker processes left none to tick the Kueue shape.)
REST_FACTOR = 9.0


class _Pace:
    """The rest after a paced refresh, shared by every worker process through Redis when
    there is one (a process resting on its own let two worker processes refresh twice as
    often as REST_FACTOR says), else kept in this process (the embedded loop)."""

    local_until = 0.0  # time.monotonic() before which this process starts no paced refresh

    @classmethod
    def resting(cls) -> bool:
        if time.monotonic() < cls.local_until:
            return True
        if not settings.REDIS_URL:
            return False
        try:
            return redis_client.marked(_resting_key())
        except Exception:  # Redis's errors vary; this process's own rest still paces it
            return False

    @classmethod
    def rest(cls, seconds: float) -> None:
        cls.local_until = time.monotonic() + seconds
        if settings.REDIS_URL and seconds >= 0.001:
            try:
                redis_client.mark(_resting_key(), seconds)
            except Exception:
                log.warning("could not share the estimates' rest", exc_info=True)

    @classmethod
    def clear(cls) -> None:
        cls.local_until = 0.0
        if settings.REDIS_URL:
            redis_client.client(settings.REDIS_URL).delete(_resting_key())


def _resting_key() -> str:
    return redis_client.key("estimates-resting")


def refresh_paced() -> int | None:
    """The beat's and the embedded loop's refresh: one at a time across all workers (an
    advisory lock a killed worker lets go of at once) and paced by REST_FACTOR. The number
    of jobs estimated, or None when skipped (another refresh runs, or they rest)."""
    if _Pace.resting():
        return None
    with session_lock("estimate_refresh") as taken:
        if not taken:
            return None
        began = time.monotonic()
        try:
            return refresh_all_estimates()
        finally:
            _Pace.rest(REST_FACTOR * (time.monotonic() - began))


def refresh_all_estimates(now: datetime | None = None) -> int:
    """Refresh every enabled queue that has jobs waiting; the number of jobs estimated."""
    estimated = 0
    queue_ids = (
        JobQueue.objects.filter(state=State.ENABLED, jobs__status=JobStatus.RUNNABLE)
        .values_list("id", flat=True)
        .distinct()
    )
    for queue_id in list(queue_ids):
        try:
            estimated += refresh_estimates(JobQueue.objects.get(pk=queue_id), now)
        except JobQueue.DoesNotExist:
            continue
        except Exception:  # one queue's failure must not stop the others' estimates
            log.exception("start-time estimates of queue %s failed", queue_id)
    return estimated


def refresh_estimates(queue: JobQueue, now: datetime | None = None) -> int:
    """Simulate the queue forward and store each RUNNABLE job's estimated start and range."""
    now = now or timezone.now()
    terms = bridge.queue_terms(queue)
    capacity = bridge.capacity_of(queue, now)
    known = bridge.read_fronts(queue, terms, now, settings.QP_ESTIMATE_MAX_WAITING)
    durations = _recent_durations(queue)
    scenarios = quantile_scenarios(known, durations)
    config = QueueConfig(
        queue.name,
        capacity,
        terms.shares,
        Ordering(queue.ordering),
        capacity_changes=_reserved_changes(queue, capacity, now),
    )
    if not scenarios[0.5][1]:
        return _store(queue, {}, set(), now)
    scenarios = scenarios_with_arrivals(
        config, scenarios, _recent_arrivals(queue, durations, now), now.timestamp()
    )
    estimates = estimate_ranges(config, scenarios, now.timestamp())
    guessed = {j.id for j in scenarios[0.5][1] if not durations.known(j.share)}
    return _store(queue, estimates, guessed, now)


def _recent_arrivals(queue: JobQueue, durations: Durations, now: datetime) -> list[WorkJob]:
    """The queue's jobs of the last hour, as work that may arrive again (any status)."""
    since = now - timedelta(seconds=ARRIVAL_WINDOW_S)
    rows = Job.objects.filter(job_queue=queue, created_at__gt=since, quota_share__isnull=False)
    return [
        WorkJob(
            str(pk),
            share,
            unit,
            quantity,
            priority,
            created.timestamp(),
            durations.expected(share, quantity),
        )
        for pk, share, unit, quantity, priority, created in rows.values_list(
            "id",
            "share_name",
            "capacity_unit__name",
            "quantity",
            "scheduling_priority",
            "created_at",
        )[:MOST_RECENT]
    ]


MOST_RECENT = 2000  # of the last hour's jobs, as many as the estimate assumes to come


def _reserved_changes(queue: JobQueue, capacity: dict, now: datetime) -> tuple:
    """The queue's capacity at each upcoming reservation start or end, so a job waiting for
    reserved capacity is expected when its window opens. The environment's change applies to
    what this queue sees now (other queues' use is taken as it is)."""
    env = queue.service_environment
    upcoming = selectors.upcoming_capacity_changes(env, now, limit=50)
    if not upcoming:
        return ()
    env_now = bridge.capacity_now(env, now)
    return tuple(
        (
            change["time"].timestamp(),
            {
                unit: max(0, capacity.get(unit, 0) + total - env_now.get(unit, 0))
                for unit, total in change["capacity"].items()
            },
        )
        for change in upcoming
    )


def _recent_durations(queue: JobQueue) -> Durations:
    """Run times (RUNNING to end) of the queue's latest successful jobs."""
    durations = Durations()
    rows = (
        Job.objects.filter(
            job_queue=queue,
            status=JobStatus.SUCCEEDED,
            started_at__isnull=False,
            stopped_at__isnull=False,
        )
        .order_by("-stopped_at")
        .values_list("share_name", "quantity", "started_at", "stopped_at")[:HISTORY]
    )
    for share, quantity, started, stopped in reversed(rows):
        durations.add(share, quantity, max(0.0, (stopped - started).total_seconds()))
    return durations


def _store(
    queue: JobQueue, estimates: dict[str, Estimate], guessed: set[str], now: datetime
) -> int:
    """Write the estimates that changed (and clear those of jobs no longer considered).

    Under the environment's tick lock: a tick writes the same rows (pending reasons, starts)
    in its own order, and two writers of many rows in different orders deadlock. A tick
    takes well under a second; if the lock does not come, this refresh writes nothing and
    the next one does."""
    with transaction.atomic():
        if not lock_environment(queue.service_environment_id, STORE_LOCK_SECONDS):
            return 0
        return _store_locked(queue, estimates, guessed, now)


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(round(seconds), UTC)


ESTIMATE_FIELDS = [
    "estimated_start_at",
    "estimated_start_earliest",
    "estimated_start_latest",
    "estimate_uncertain",
]


def _store_locked(
    queue: JobQueue, estimates: dict[str, Estimate], guessed: set[str], now: datetime
) -> int:
    changed = []
    for pk, stored in _stored(queue).items():
        estimate = estimates.get(str(pk)) or Estimate(None, None, None)
        values = (
            _moment(estimate.expected),
            _moment(estimate.earliest),
            _moment(estimate.latest),
            estimate.expected is not None
            and (str(pk) in guessed or estimate.uncertain(now.timestamp())),
        )
        if values != stored:
            changed.append((pk, values))
    # A job dispatched since the read keeps a stale value, which nothing shows: every view
    # and the API show an estimate only while the job is RUNNABLE.
    _write(changed)
    return sum(1 for e in estimates.values() if e.expected is not None)


def _stored(queue: JobQueue) -> dict:
    """What is stored for the front of the queue (the jobs estimated now, read again through
    the same index) and for the jobs holding an estimate from before (job_estimated): not the
    whole queue. (Listing the estimated ids instead let PostgreSQL test every waiting job
    against thousands of ids: minutes at 300k.)"""
    front = bridge.waiting_in_order(queue)[: settings.QP_ESTIMATE_MAX_WAITING]
    before = Job.objects.filter(
        job_queue=queue, status=JobStatus.RUNNABLE, estimated_start_at__isnull=False
    )
    return {
        row[0]: row[1:]
        for rows in (front, before)
        for row in rows.values_list("id", *ESTIMATE_FIELDS)
    }


def _write(changed: list[tuple]) -> None:
    """One UPDATE for every changed job, its values sent as arrays (infra.bulk.update_rows):
    the environment's ticks wait for its lock meanwhile, and a statement per job costs
    PostgreSQL a statement's overhead thousands of times over."""
    if not changed:
        return
    ids, rows = zip(*changed, strict=True)
    columns = zip(*rows, strict=True)
    update_rows(Job, list(ids), dict(zip(ESTIMATE_FIELDS, map(list, columns), strict=True)))
