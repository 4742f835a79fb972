"""The periodic full plan of a long queue, read and planned outside the environment's tick lock.

A long STRICT queue's ticks read only the heads of its shares' lines (bridge.plan_heads); every
QP_FULL_PLAN_SECONDS every active job is read, planned and explained, the safety net against
writes that bypassed the services. At a million waiting jobs that read and plan take seconds,
and inside a tick they would hold the environment's lock, and every other tick of it, for as
long. Here they run without the lock, and only the plan's application takes it:

- nothing that decides what runs changed since the read (the queue's version, which every
  start, preemption, end and priority change moves; its capacity; its count of dispatched
  jobs): the plan is applied as a tick would apply it. Jobs submitted meanwhile were not read;
  no tick has explained them, so the next tick plans them.
- something changed: the plan's starts and preemptions may no longer fit, so only its reasons
  are written (to jobs still waiting) and the next tick plans again from the heads, which it
  reads and explains every time.

A tick plans fully itself only when no full plan has come for twice the period (no worker runs
this: the safety net does not depend on it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from quotaportal.infra.locks import lock_environment, session_lock
from quotaportal.quotas.backends import backend_for
from quotaportal.quotas.models import (
    DISPATCHED,
    Job,
    JobQueue,
    QuotaShare,
    SchedulerRun,
    TickMemo,
)
from quotaportal.tick import bridge, changes
from quotaportal.tick.bridge import fairness
from quotaportal.tick.carry import Planned, carry_out
from quotaportal.tick.records import collector_paused, record_run
from quotaportal.tick.run import ended_unfitted, terms_standing, tickable_queue_ids
from scheduler import check_plan, plan_tick

log = logging.getLogger(__name__)

APPLIED, REASONS_ONLY, NOT_DUE, BUSY = "applied", "reasons only", "not due", "busy"


@dataclass(frozen=True)
class Outcome:
    queue_id: int
    result: str  # APPLIED, REASONS_ONLY, NOT_DUE or BUSY
    read_and_plan_s: float = 0.0  # without the lock
    locked_s: float = 0.0  # holding the environment's tick lock


def plan_due_queues() -> list[Outcome]:
    """Beat's task (and the embedded loop's): the full plan of every queue whose ticks read
    the heads of its lines and whose last full plan is QP_FULL_PLAN_SECONDS old."""
    outcomes = [plan_fully(queue_id) for queue_id in tickable_queue_ids()]
    return [outcome for outcome in outcomes if outcome.result != NOT_DUE]


def is_due(queue: JobQueue, now) -> bool:
    """Whether the queue's ticks read heads (bridge.reads_heads, and enough waited at the last
    full plan) and its last full plan is at least QP_FULL_PLAN_SECONDS old."""
    if settings.QP_FULL_PLAN_SECONDS <= 0:
        return False  # every tick reads every job
    memo = TickMemo.of(queue)
    if not bridge.reads_heads(queue) or memo.fully_planned_at is None:
        return False
    if (now - memo.fully_planned_at).total_seconds() < settings.QP_FULL_PLAN_SECONDS:
        return False
    # Counted last: beat asks of every queue every QP_FULL_PLAN_CHECK_SECONDS, and most are
    # not due.
    shares = QuotaShare.objects.filter(job_queue_id=queue.pk).count()
    return bridge.heads_pay_off(memo.fully_planned_waiting or 0, shares)


def plan_fully(queue_id: int, force: bool = False) -> Outcome:
    """Read and plan every active job of the queue without the tick lock, then apply what
    still holds under it. One at a time per queue, across workers; `force`: even when not due."""
    with session_lock("full_plan", queue_id) as mine:
        if not mine:
            return Outcome(queue_id, BUSY)
        queue = _queue(queue_id)
        if queue is None or not (force or is_due(queue, timezone.now())):
            return Outcome(queue_id, NOT_DUE)
        started = time.perf_counter()
        with collector_paused():
            planned = _read_and_plan(queue)
            read_s = time.perf_counter() - started
            result, locked_s = _apply(queue.id, planned)
    log.info(
        "full plan of queue %s: %s (read and planned in %.0f ms, %.0f ms under the tick lock)",
        queue_id,
        result,
        read_s * 1000,
        locked_s * 1000,
    )
    return Outcome(queue_id, result, read_s, locked_s)


def _queue(queue_id: int) -> JobQueue | None:
    return (
        JobQueue.objects.select_related("service_environment", "tick_memo")
        .filter(pk=queue_id)
        .first()
    )


def _read_and_plan(queue: JobQueue) -> Planned:
    """Every active job read and planned as of now. The version is read first: whatever
    changes from then on moves it, so the check under the lock sees it."""
    now = timezone.now()
    with transaction.atomic():
        version = JobQueue.objects.values_list("state_version", flat=True).get(pk=queue.pk)
        terms = terms_standing(queue, fairness.opened(queue, now), now)
        loaded = bridge.load_snapshot(queue, now, frozenset(), terms)
    plan = plan_tick(loaded.snapshot, now.timestamp(), positions=False)
    check_plan(loaded.snapshot, plan, positions=False)
    # Every job's reason, the usage and the counts, worked out before the lock is taken.
    return Planned(loaded, plan, version, now).worked_out()


def _apply(queue_id: int, planned: Planned) -> tuple[str, float]:
    """Apply the plan, or its reasons alone, under the environment's tick lock: the outcome
    and the seconds the lock was held. A tick's run is recorded, as a tick's would be."""
    with transaction.atomic(), changes.planning(queue_id):
        queue = _queue(queue_id)
        if queue is None:
            return NOT_DUE, 0.0
        if not lock_environment(queue.service_environment_id, timeout_seconds=30.0):
            return BUSY, 0.0  # ticks kept it; the next look tries again
        locked, locked_at = time.perf_counter(), timezone.now()
        run = SchedulerRun(job_queue=queue, replanned=True)
        if _unchanged_since_read(queue, planned):
            backend = backend_for(queue.service_environment)
            # Written as of now (start times, samples), as a tick planning now would write
            # it: what it planned from is the state now, but for the jobs submitted since,
            # which a tick may have explained meanwhile: the next tick plans again (settle
            # False), from the heads, and explains them anew.
            fair = fairness.opened(queue, locked_at)
            outcome = carry_out(queue, planned, backend, fair, at=locked_at, settle=False)
            run.dispatched, run.preempted = outcome.dispatched, outcome.preempted
            result = APPLIED
        else:
            _write_reasons(queue, planned)
            result = REASONS_ONLY
        record_run(run, locked_at, locked)
        return result, time.perf_counter() - locked


def _write_reasons(queue: JobQueue, planned: Planned) -> None:
    """The plan's reasons, to the jobs still waiting; the next tick plans again, from the
    heads of the lines, which it reads and explains every time."""
    bridge.write_pending(planned.loaded, planned.plan, planned.reasons)
    jobs = planned.loaded.snapshot.jobs
    TickMemo.objects.remember(
        queue.pk,
        planned_version=-1,
        # The terms the reasons were written under: if they changed meanwhile, the next
        # tick finds them different and reads every job.
        planned_terms=planned.loaded.terms,
        fully_planned_at=planned.now,
        fully_planned_waiting=len(jobs) - planned.dispatched_before,
    )


def _unchanged_since_read(queue: JobQueue, planned: Planned) -> bool:
    snapshot = planned.loaded.snapshot
    if queue.state_version != planned.version:
        return False
    now = timezone.now()
    if ended_unfitted(queue.service_environment_id, now):
        return False  # a tick fits usage to the capacity left (run.ended_unfitted)
    if bridge.capacity_of(queue, now) != snapshot.capacity:
        return False
    dispatched = Job.objects.filter(job_queue_id=queue.pk, status__in=DISPATCHED).count()
    return dispatched == sum(1 for job in snapshot.jobs if job.dispatched_at is not None)
