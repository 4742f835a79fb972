"""manage.py bench_tick — time a real tick against one raw SELECT of the same active jobs.

Seeds a synthetic queue (scheduler.bench's generator) straight into the database, ticks until
a tick changes nothing, then reports medians of: ticks that change nothing (`tick_ms`; they
see the queue's version unchanged and skip planning), the same ticks forced to plan in full
(`replan_ms`, as after a change elsewhere), and the tick's read of the active jobs alone
(`select_ms`, the floor of reading the state once), the same full plan made as the workers
make it, outside the tick lock (`full_plan_outside_ms` without it, `full_plan_locked_ms`
holding it), a start-time estimate's read and whole
refresh (`estimate_read_ms`, `estimate_ms`); then one tick that dispatches about
--dispatch jobs after the capacity grows.
Everything runs in a transaction that is rolled back, so the database is left as it was.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime
from itertools import islice

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.db.models import F, Sum

from quotaportal.benchmarks.rolled_back import median_ms, rolled_back
from quotaportal.quotas import services
from quotaportal.quotas.models import (
    CapacityUnit,
    EnvironmentCapacity,
    Job,
    JobQueue,
    JobStatus,
    PendingReason,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    ShareCapacityLimit,
    Team,
    TickMemo,
)
from quotaportal.quotas.services import fairness
from quotaportal.tick import bridge, full_plan
from quotaportal.tick.run import run_tick
from quotaportal.whatif import estimates
from scheduler import Snapshot
from scheduler.bench import synthetic_snapshot

SEED_BATCH = 5_000


def seed(runnable: int, dispatched: int, shares: int, units: int) -> JobQueue:
    """Write the synthetic snapshot as rows (a benchmark fixture, so bulk inserts, not services)."""
    return seed_snapshot(synthetic_snapshot(runnable, dispatched, shares, units), explained=True)


def seed_snapshot(snap: Snapshot, progress=None, *, explained: bool = False) -> JobQueue:
    """A queue holding the snapshot's capacity, shares and jobs (dispatched ones RUNNING), in
    a SIMULATED environment of its own; `progress(done, total)` hears of the jobs written.

    `explained`: the waiting jobs are stored as a queue that has been running a while holds
    them, each with the reason a tick gave it when it arrived (BEHIND_SHARE_HEAD; the first
    full plan corrects the heads'), instead of as a burst of submits no tick has seen yet."""
    tag = f"bench-{time.time_ns()}"
    unit_rows = {
        name: CapacityUnit.objects.get_or_create(name=f"{tag}-{name}")[0] for name in snap.capacity
    }
    env = ServiceEnvironment.objects.create(name=tag, backend="SIMULATED")
    EnvironmentCapacity.objects.bulk_create(
        EnvironmentCapacity(environment=env, capacity_unit=unit_rows[u], max_capacity=n)
        for u, n in snap.capacity.items()
    )
    queue = JobQueue.objects.create(
        name=tag,
        service_environment=env,
        scheduling_policy=SchedulingPolicy.objects.create(name=tag),
        ordering=snap.ordering.value,
    )
    share_rows = _seed_shares(queue, snap, unit_rows, Team.objects.create(name=tag))
    _seed_jobs(queue, snap, share_rows, unit_rows, progress, explained)
    return queue


def _seed_shares(queue: JobQueue, snap: Snapshot, unit_rows: dict, team: Team) -> dict:
    """The snapshot's shares and their limits as rows: share name -> QuotaShare."""
    share_rows = {
        s.name: QuotaShare(
            job_queue=queue,
            name=s.name,
            team=team,
            sharing_strategy=s.strategy.value,
            borrow_limit=s.borrow_limit,
            in_share_preemption=s.in_share_preemption,
            state="ENABLED" if s.enabled else "DISABLED",
        )
        for s in snap.shares
    }
    QuotaShare.objects.bulk_create(share_rows.values())
    ShareCapacityLimit.objects.bulk_create(
        ShareCapacityLimit(share=share_rows[s.name], capacity_unit=unit_rows[u], max_capacity=n)
        for s in snap.shares
        for u, n in s.limits.items()
    )
    return share_rows


def _seed_jobs(queue, snap: Snapshot, share_rows, unit_rows, progress, explained: bool) -> None:
    """The snapshot's jobs as rows, written SEED_BATCH at a time."""
    waiting_reason = PendingReason.BEHIND_SHARE_HEAD if explained else ""
    rows = (
        Job(
            name=j.id,
            job_queue=queue,
            quota_share=share_rows[j.share],
            share_name=j.share,
            capacity_unit=unit_rows[j.unit],
            quantity=j.quantity,
            scheduling_priority=j.priority,
            created_at=datetime.fromtimestamp(j.created_at, UTC),
            status=JobStatus.RUNNING if j.dispatched else JobStatus.RUNNABLE,
            pending_reason=waiting_reason if not j.dispatched else "",
            scheduled_at=datetime.fromtimestamp(j.dispatched_at, UTC) if j.dispatched else None,
        )
        for j in snap.jobs
    )
    total = len(snap.jobs)
    for done in range(0, total, SEED_BATCH):
        Job.objects.bulk_create(islice(rows, SEED_BATCH))
        if progress:
            progress(min(done + SEED_BATCH, total), total)


def raw_select(queue_id: int) -> None:
    """The tick's own read of the active jobs, alone."""
    bridge.active_columns(queue_id)


def grow_capacity(queue: JobQueue, jobs: int) -> None:
    """Room for about `jobs` more average jobs: share limits and the environment grow.

    Goes through the services (the tick must see the change); only the share limits are raised
    in bulk, as a fixture, before the service call that records the change.
    """
    demand = dict(
        Job.objects.filter(job_queue=queue, status=JobStatus.RUNNABLE)
        .values_list("capacity_unit__name")
        .annotate(total=Sum("quantity"))
    )
    runnable = sum(demand.values()) or 1
    # RESERVE shares keep their limits: raising them would only reserve more idle capacity.
    ShareCapacityLimit.objects.filter(share__job_queue=queue).exclude(
        share__sharing_strategy="RESERVE"
    ).update(max_capacity=F("max_capacity") + 10_000)
    count = Job.objects.filter(job_queue=queue, status=JobStatus.RUNNABLE).count() or 1
    per_job = runnable / count
    capacity = bridge.environment_limits(queue.service_environment)
    services.update_service_environment(
        None,
        queue.service_environment,
        capacity_limits={
            unit: capacity[unit] + round(jobs * per_job * demand.get(unit, 0) / runnable)
            for unit in capacity
        },
    )


def forget_last_plan(queue: JobQueue, *, every_job: bool = False) -> None:
    """Make the next tick plan, as after any change to the queue; `every_job`: read every
    active job (the periodic full plan) rather than the heads of the shares' lines."""
    fields = {"planned_version": -1}
    if every_job:
        fields["fully_planned_at"] = None
    TickMemo.objects.remember(queue.pk, **fields)


def settle(queue: JobQueue, most: int = 30) -> int:
    """Tick until a tick starts and preempts nothing; returns the ticks it took."""
    for count in range(1, most + 1):
        run = run_tick(queue.id)
        if not run.dispatched and not run.preempted:
            return count
    raise CommandError(f"the queue did not settle within {most} ticks")


class Command(BaseCommand):
    help = "Benchmark one scheduler tick against one raw SELECT of the same jobs."

    def add_arguments(self, parser):
        parser.add_argument(
            "--runnable",
            type=_sizes,
            default=[20_000],
            help="RUNNABLE jobs; several, comma-separated (10000,100000,1000000), for a curve",
        )
        parser.add_argument("--dispatched", type=int, default=2_000)
        parser.add_argument("--shares", type=int, default=200)
        parser.add_argument("--units", type=int, default=5)
        parser.add_argument(
            "--dispatch",
            type=int,
            default=1_000,
            help="about how many jobs the growing tick should start",
        )
        parser.add_argument("--repeat", type=int, default=5)
        parser.add_argument(
            "--fair-share",
            type=int,
            metavar="HALF_LIFE_SECONDS",
            help="tick under a fair-share policy of this half-life, each share with a past",
        )
        parser.add_argument("--json", action="store_true")

    def handle(
        self,
        *args,
        runnable,
        dispatched,
        shares,
        units,
        dispatch,
        repeat,
        json: bool,
        fair_share=None,
        **options,
    ):
        self.fair_share = fair_share
        if min(shares, units, repeat) < 1 or min(*runnable, dispatched, dispatch) < 0:
            raise CommandError(
                "sizes must be positive (runnable, dispatched and dispatch may be 0)"
            )
        say = (lambda text: None) if json else self.stderr.write
        rows = [
            self.measure_size(size, dispatched, shares, units, dispatch, repeat, say)
            for size in runnable
        ]
        if json:
            self.stdout.write(_json(rows[0] if len(rows) == 1 else rows))
            return
        for key in rows[0]:
            self.stdout.write(f"{key:>24}: " + "  ".join(f"{row[key]!s:>12}" for row in rows))

    def measure_size(self, runnable, dispatched, shares, units, dispatch, repeat, say) -> dict:
        def measure() -> dict:
            say(
                f"seeding {runnable:,} runnable and {dispatched:,} dispatched jobs"
                f" in {shares} shares ..."
            )
            snap = synthetic_snapshot(runnable, dispatched, shares, units)
            queue = seed_snapshot(snap, progress=_progress(say), explained=True)
            if self.fair_share is not None:
                queue = with_fair_share(queue, self.fair_share)
            say("settling: ticking until a tick changes nothing ...")
            settle(queue)
            return self.measure(queue, repeat, dispatch, say)

        figures = {"runnable": runnable, "dispatched": dispatched, "shares": shares}
        figures["fair_share_half_life_s"] = self.fair_share
        figures.update(rolled_back(measure))
        figures["vendor"] = connection.vendor
        return figures

    def measure(self, queue: JobQueue, repeat: int, dispatch: int, say) -> dict:
        say("timing ticks that change nothing ...")
        tick_ms = median_ms(lambda: run_tick(queue.id), repeat)
        replan_ms = median_ms(
            lambda: run_tick(queue.id), repeat, setup=lambda: forget_last_plan(queue)
        )
        say("timing full plans (every active job read) ...")
        full_ms = median_ms(
            lambda: run_tick(queue.id),
            repeat,
            setup=lambda: forget_last_plan(queue, every_job=True),
        )
        say("timing full plans made outside the tick lock, as the workers make them ...")
        outside = _outside_full_plans(queue, repeat)
        select_ms = median_ms(lambda: raw_select(queue.id), repeat)
        say("timing start-time estimates (the read alone, then a whole refresh) ...")
        estimate_read_ms = median_ms(lambda: _read_fronts(queue), repeat)
        estimate_ms = median_ms(lambda: estimates.refresh_estimates(queue), repeat)
        say(f"growing capacity so about {dispatch:,} jobs can start, {repeat} times ...")
        grow_ms, run = _dispatch_tick_ms(queue, dispatch, repeat)
        return {
            "tick_ms": round(tick_ms, 2),
            "select_ms": round(select_ms, 2),
            "ratio": round(tick_ms / select_ms, 2),
            "replan_ms": round(replan_ms, 2),
            "replan_ratio": round(replan_ms / select_ms, 2),
            "full_plan_ms": round(full_ms, 2),
            "full_plan_outside_ms": round(
                statistics.median(o.read_and_plan_s for o in outside) * 1000, 2
            ),
            "full_plan_locked_ms": round(statistics.median(o.locked_s for o in outside) * 1000, 2),
            "full_plan_outcome": outside[-1].result,
            "estimate_read_ms": round(estimate_read_ms, 2),
            "estimate_ms": round(estimate_ms, 2),
            "dispatch_tick_ms": round(grow_ms, 2),
            "dispatch_tick_started": run.dispatched,
            "dispatch_tick_preempted": run.preempted,
            "dispatch_tick_error": run.error,
        }


def _median_ms(seconds) -> float:
    return round(statistics.median(seconds) * 1000, 2)


def _outside_full_plans(queue: JobQueue, repeat: int) -> list[full_plan.Outcome]:
    """The periodic full plan as beat's task makes it: read and planned without the tick
    lock, applied under it."""
    return [full_plan.plan_fully(queue.id, force=True) for _ in range(repeat)]


def _read_fronts(queue: JobQueue) -> None:
    """What a start-time estimate reads of the queue, alone."""
    now = datetime.now(UTC)
    bridge.read_fronts(queue, bridge.queue_terms(queue), now, settings.QP_ESTIMATE_MAX_WAITING)


def with_fair_share(queue: JobQueue, half_life: int) -> JobQueue:
    """The queue under a fair-share policy, each share with a different past (an hour more
    than the one before it in name order)."""
    names = QuotaShare.objects.filter(job_queue=queue).order_by("name").values_list("name")
    past = {name: 3600.0 * index for index, (name,) in enumerate(names)}
    return fairness.set_fair_share(None, queue, half_life_seconds=half_life, seed=past)


class _Undone(Exception):
    pass


def _dispatch_tick_ms(queue: JobQueue, dispatch: int, repeat: int):
    """The median time of a tick that starts about `dispatch` jobs after the capacity grows,
    each grown and ticked in a savepoint rolled back after (so each starts from the same
    queue), and the run of the last."""
    timings, run = [], None
    for _ in range(repeat):
        try:
            with transaction.atomic():
                grow_capacity(queue, dispatch)
                start = time.perf_counter()
                run = run_tick(queue.id)
                timings.append((time.perf_counter() - start) * 1000)
                raise _Undone
        except _Undone:
            pass
    return statistics.median(timings), run


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"give whole numbers separated by commas, e.g. 10000,100000; got {text[:40]!r}"
        ) from None
    return sizes


def _progress(say):
    """Say how far seeding is, every tenth of the way."""
    marks = set()

    def progress(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth not in marks:
            marks.add(tenth)
            say(f"  {done:,} of {total:,} jobs written")

    return progress


def _json(figures) -> str:
    return json.dumps(figures)
