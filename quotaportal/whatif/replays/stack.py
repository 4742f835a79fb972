"""A workload replayed through the whole stack: its jobs submitted through the services at
their submit times, each running its duration on a SIMULATED environment, ticked as in
production (or on a period). Every write goes through `services`."""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import groupby

from django.db.models import Max
from django.utils import timezone

from quotaportal.quotas import services
from quotaportal.quotas.models import (
    ACTIVE,
    CapacityUnit,
    Job,
    JobQueue,
    JobStatus,
    SchedulerRun,
    Team,
)
from quotaportal.tick.run import run_tick
from scheduler.simulate import WorkJob, Workload, capacity_bound_s
from scheduler.simulate.report import percentile, rounded

POLL_S = 0.25


class RealClock:
    poll_s = POLL_S

    def __init__(self, speed: float = 1.0):
        self.speed = speed
        self.began = time.monotonic()
        self.origin = timezone.now()

    def elapsed(self) -> float:
        return (time.monotonic() - self.began) * self.speed

    def sleep_until(self, at: float) -> None:
        delay = (at - self.elapsed()) / self.speed
        if delay > 0:
            time.sleep(delay)

    def at(self, offset: float) -> datetime | None:
        return None  # the services read the real time

    def seconds_between(self, earlier: datetime, later: datetime) -> float:
        """Of this clock, between two times the services stamped."""
        return (later - earlier).total_seconds() * self.speed


class VirtualClock:
    """Time that moves only when the replay says so: tests replay hours in milliseconds."""

    poll_s = float("inf")

    def __init__(self, origin: datetime | None = None):
        self.origin = origin or datetime(2026, 1, 1, tzinfo=UTC)
        self.now = 0.0

    def elapsed(self) -> float:
        return self.now

    def sleep_until(self, at: float) -> None:
        self.now = max(self.now, at)

    def at(self, offset: float) -> datetime:
        return self.origin + timedelta(seconds=offset)

    def seconds_between(self, earlier: datetime, later: datetime) -> float:
        return (later - earlier).total_seconds()


@dataclass
class ReplayResult:
    queues: dict[str, JobQueue]
    job_ids: dict[str, str]  # workload job id -> database job id
    wall_s: float = 0.0
    capacity_bound_s: float = 0.0
    ticks: int = 0
    unfinished: int = 0
    began_at: datetime | None = None  # the replay's start, as the services stamp times
    # The replay owns its queues while it runs: share and unit lookups are cached between batches.
    lookups: dict = field(default_factory=dict)


def setup_queues(workload: Workload, prefix: str, team: Team | None = None) -> dict[str, JobQueue]:
    """A SIMULATED environment and job queue per workload queue, with its shares."""
    queues = {}
    for queue_workload in workload.queues:
        config = queue_workload.config
        name = prefix if len(workload.queues) == 1 else f"{prefix}-{config.name}"
        units = set(config.capacity) | {u for s in config.shares for u in s.limits}
        known = set(CapacityUnit.objects.filter(name__in=units).values_list("name", flat=True))
        for unit in sorted(units - known):
            services.create_capacity_unit(None, name=unit)
        env = services.create_service_environment(
            None, name=name, backend="SIMULATED", capacity_limits=dict(config.capacity)
        )
        policy = services.create_scheduling_policy(None, name=name)
        queue = services.create_job_queue(
            None,
            name=name,
            scheduling_policy=policy,
            service_environment=env,
            ordering=config.ordering.value,
        )
        owner = team or services.create_team(None, name=name)
        for share in config.shares:
            services.create_share(
                None,
                job_queue=queue,
                name=share.name,
                team=owner,
                capacity_limits=dict(share.limits),
                sharing_strategy=share.strategy.value,
                borrow_limit=share.borrow_limit if share.strategy == "LEND_AND_BORROW" else None,
                in_share_preemption=share.in_share_preemption,
                state="ENABLED" if share.enabled else "DISABLED",
            )
        queues[config.name] = queue
    return queues


def replay(
    workload: Workload,
    queues: dict[str, JobQueue],
    *,
    clock=None,
    tick_s: float | None = None,
    tick: Callable[[JobQueue, datetime | None], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 3600.0,
) -> ReplayResult:
    """Submit every job at its submit time (a SIMULATED job runs its duration) and wait
    until all have ended. With `tick_s` the replay ticks each queue on that period itself,
    starting with the first submit (the same grid as `simulate(tick_s=...)`); without it
    the running system's ticks do (beat and immediate ticks)."""
    clock = clock or RealClock()
    if isinstance(clock, VirtualClock) and not tick_s:
        raise ValueError("a replay on a virtual clock needs tick_s: nothing else moves time")
    tick = tick or (lambda queue, now: run_tick(queue.id, now=now))
    pending = _workload_events(workload)
    total = workload.job_count
    first = pending[0][0] if pending else 0.0
    bound = max((capacity_bound_s(q) for q in workload.queues), default=0.0)
    result = ReplayResult(queues, {}, capacity_bound_s=bound)
    began = clock.elapsed()
    # The replay's jobs are the queues' jobs created from now on (a count by queue and
    # status is cheap; one by 15,000 ids is not).
    since = result.began_at = clock.at(first) or timezone.now()
    next_tick = first if tick_s else None
    counted, unfinished = float("-inf"), 0
    while True:
        now = first + clock.elapsed() - began  # on the workload's clock
        _submit_due(result, queues, _pop_due(pending, now), clock)
        if next_tick is not None and next_tick <= now:
            next_tick = _tick_grid(result, tick, clock, next_tick, tick_s, now)
        # Counting is for the end and for progress: once a second of the clock at most.
        if not pending or clock.elapsed() - counted >= 1.0:
            counted = clock.elapsed()
            unfinished = _unfinished(queues, since)
            if progress:
                progress(len(result.job_ids) - unfinished, total)
            if not pending and not unfinished:
                break
        if clock.elapsed() - began > timeout_s:
            result.unfinished = unfinished
            break
        wake = _next_wake(pending, next_tick, now, clock)
        clock.sleep_until(began + wake - first)
    result.wall_s = _workload_time(result, clock, began)
    return result


def _next_wake(pending: deque, next_tick: float | None, now: float, clock) -> float:
    """When the replay next has something to do, on the workload's clock: the next submit or
    grid tick; without ticks of its own it only watches the system, every POLL_S."""
    upcoming = [t for t in (pending[0][0] if pending else None, next_tick) if t is not None]
    wake = min(upcoming) if upcoming else now + POLL_S
    return min(wake, now + clock.poll_s)


def _pop_due(pending: deque, now: float) -> list:
    """The workload's events due by `now`, taken off the front of `pending`."""
    due = []
    while pending and pending[0][0] <= now:
        due.append(pending.popleft())
    return due


def _tick_grid(result: ReplayResult, tick, clock, next_tick: float, tick_s: float, now: float):
    """Tick every queue at the grid's instant `next_tick`; the next instant after `now` (a
    replay that fell behind skips the ticks it missed)."""
    for queue in result.queues.values():
        tick(queue, clock.at(next_tick))
    result.ticks += 1
    while next_tick <= now:
        next_tick += tick_s
    return next_tick


def _workload_time(result: ReplayResult, clock, began: float) -> float:
    """The workload's time: its last job's end, not the moment the replay looked (up to
    POLL_S later); when jobs had not ended, how long the replay waited."""
    if not result.unfinished:
        jobs = _jobs_since(result.queues, result.began_at)
        last_end = jobs.aggregate(last=Max("stopped_at"))["last"]
        if last_end is not None:
            return clock.seconds_between(result.began_at, last_end)
    return clock.elapsed() - began


def latencies(result: ReplayResult) -> dict:
    """How late the stack acted on the replay's moments, in milliseconds of the services'
    clock: a job's start after its dispatch (a SIMULATED job starts on the tick after it),
    its end after its duration (the tick at that instant), and the ticks that ran."""
    jobs = _jobs_since(result.queues, result.began_at).filter(status=JobStatus.SUCCEEDED)
    timings = jobs.values_list(
        "scheduled_at", "started_at", "stopped_at", "simulated_duration_seconds"
    )
    starts, ends = [], []
    for scheduled, started, stopped, seconds in timings:
        if None in (scheduled, started, stopped, seconds):
            continue  # a job of the queue's own, not the workload's (`replay --queue`)
        starts.append((started - scheduled).total_seconds() * 1000)
        ends.append(((stopped - started).total_seconds() - seconds) * 1000)
    ticks = list(
        SchedulerRun.objects.filter(
            job_queue__in=list(result.queues.values()),
            started_at__gte=result.began_at,
            skipped=False,
        ).values_list("duration_ms", flat=True)
    )
    starts.sort()
    ends.sort()
    return {
        "start_after_dispatch_ms_p50": rounded(percentile(starts, 0.5), 1),
        "end_after_duration_ms_mean": rounded(statistics.fmean(ends) if ends else None, 1),
        "end_after_duration_ms_p90": rounded(percentile(ends, 0.9), 1),
        "ticks_run": len(ticks),
        "tick_ms_mean": rounded(statistics.fmean(ticks) if ticks else None, 1),
    }


def _workload_events(workload: Workload) -> deque:
    """(time, 0 for a submit or 1 for a priority change, queue, job id, job, new priority),
    in the order the replay applies them."""
    events = [
        (job.submit_s, 0, queue.config.name, job.id, job, None)
        for queue in workload.queues
        for job in queue.jobs
    ]
    events += [
        (max(at, job.submit_s), 1, queue.config.name, job.id, job, priority)
        for queue in workload.queues
        for job in queue.jobs
        for at, priority in job.priority_changes
    ]
    return deque(sorted(events, key=lambda e: e[:4]))


def _submit_due(result: ReplayResult, queues: dict, due: list, clock) -> None:
    """Submit what is due, one batch per queue and instant (as a sweep would), then apply
    the priority changes due."""
    submits = [(at, name, job) for at, kind, name, _, job, _ in due if kind == 0]
    for (at, name), group in groupby(submits, key=lambda s: (s[0], s[1])):
        jobs = [job for _, _, job in group]
        created = services.submit_jobs(
            None,
            [_item(queues[name], job) for job in jobs],
            now=clock.at(at),
            lookups=result.lookups,
        )
        for job, row in zip(jobs, created, strict=True):
            result.job_ids[job.id] = str(row.id)
    for _, kind, _, _, job, priority in due:
        if kind == 1:
            _raise(result, job, priority)


def _item(queue: JobQueue, job: WorkJob) -> dict:
    return {
        "job_queue": queue,
        "quota_share": job.share,
        "capacity_unit": job.unit,
        "name": job.id[:128],
        "quantity": job.quantity,
        "scheduling_priority": job.priority,
        "simulated_duration_seconds": job.duration_s,
    }


def _raise(result: ReplayResult, job: WorkJob, priority: int) -> None:
    """A priority change of the workload (a no-op on a job that has ended)."""
    target = Job.objects.get(pk=result.job_ids[job.id])
    if target.status in ACTIVE:
        services.set_priority(None, target, priority)


def _unfinished(queues: dict, since: datetime) -> int:
    return _jobs_since(queues, since).filter(status__in=ACTIVE).count()


def _jobs_since(queues: dict, since: datetime):
    """The replay's jobs: its queues' jobs created since it began."""
    return Job.objects.filter(job_queue__in=list(queues.values()), created_at__gte=since)
