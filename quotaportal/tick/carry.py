"""Carrying out a checked plan under the environment's tick lock: start, preempt, explain, record
the usage it leaves, and remember the plan in the queue's TickMemo (a tick's, or a full plan
made outside the lock: tick.full_plan)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property

from django.conf import settings
from django.db.models import F

from quotaportal.quotas.models import JobQueue, TickMemo, UtilizationSample
from quotaportal.tick import bridge, changes
from quotaportal.tick.bridge import fairness
from scheduler import Plan

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    replanned: bool
    calls: int = 0
    dispatched: int = 0
    preempted: int = 0


@dataclass(frozen=True)
class Planned:
    """A checked plan, the snapshot it was made from, and the queue's version read before.
    What applying it derives from the two alone is worked out once, when first asked: a full
    plan made outside the tick lock asks before taking it (tick.full_plan)."""

    loaded: bridge.Loaded
    plan: Plan
    version: int
    now: object  # datetime: the instant it was planned for

    @cached_property
    def reasons(self) -> list[tuple[str, str]]:
        return bridge.changed_reasons(self.loaded, self.plan)

    @cached_property
    def usage(self) -> dict[str, dict[str, int]]:
        return bridge.usage_after(self.loaded.snapshot, self.plan)

    @cached_property
    def dispatched_before(self) -> int:
        return sum(1 for job in self.loaded.snapshot.jobs if job.dispatched_at is not None)

    def worked_out(self) -> Planned:
        """Everything applying it needs, worked out now."""
        self.reasons, self.usage, self.dispatched_before  # noqa: B018
        return self


def carry_out(
    queue: JobQueue,
    planned: Planned,
    backend,
    fair,
    calls: int = 0,
    *,
    at=None,
    settle: bool = True,
) -> Outcome:
    """Apply a checked plan under the environment's tick lock: start, preempt and explain
    (or, where the backend schedules itself or cannot be reached, explain only), then record
    the usage it leaves and remember the plan (TickMemo). `at`: the instant written
    (start times, samples), when not the one planned for; `settle`: a plan that changes
    nothing may be remembered as the fixed point that lets the next ticks skip planning."""
    loaded, plan = planned.loaded, planned.plan
    now = at or planned.now
    if backend.schedules_itself or not backend.accepts_work(queue.service_environment):
        # AWS Batch dispatches, preempts and times out these jobs; a backend that cannot be
        # reached now (Slurm down) could carry nothing out, so the plan only explains, and
        # is planned again once the backend answers.
        bridge.write_pending(loaded, plan, planned.reasons)
        usage = bridge.usage_after(loaded.snapshot, None)
        sampled = record_sample(queue, usage, now)
        settled = backend.schedules_itself and settle
        sampled |= fairness.carried_on(fair, usage, loaded.snapshot)
        _remember_plan(queue, planned, now, settled=settled, sampled=sampled)
        tick_at_next_change(queue, backend, now)
        return Outcome(replanned=True, calls=calls)
    started, preempted = bridge.apply_plan(
        queue,
        loaded,
        plan,
        now,
        stops_at_once=backend.preemption_stops_at_once,
        reasons=planned.reasons,
    )
    if started and (unplaced := backend.launch(queue, started, now)):
        # Capacity raced away (a host lost since the snapshot): those jobs wait again.
        log.error("queue %s: the backend could not place %s; requeued", queue.name, unplaced)
        started = [job_id for job_id in started if job_id not in unplaced]
    dispatched = len(started)
    if dispatched or preempted:
        changes.dispatched(queue.service_environment_id, started, preempted)
    usage = planned.usage
    sampled = record_sample(queue, usage, now) | fairness.carried_on(fair, usage, loaded.snapshot)
    # Only a plan that changed nothing is a fixed point worth remembering; after any change
    # the next tick must plan again (a preempted job may start, a blocked share may move).
    settled = not dispatched and not preempted
    if not settled:
        # What runs changed: a full plan read before this (tick.full_plan) must not apply.
        JobQueue.objects.filter(pk=queue.id).update(state_version=F("state_version") + 1)
    _remember_plan(queue, planned, now, settled=settled and settle, sampled=sampled)
    tick_at_next_change(queue, backend, now)
    return Outcome(replanned=True, calls=calls, dispatched=dispatched, preempted=preempted)


def tick_at_next_change(queue: JobQueue, backend, now) -> None:
    """A backend whose jobs start and end by themselves (SIMULATED) gets a tick at that
    instant, as an agent's report would bring one; only where ticks follow changes at all."""
    if settings.QP_IMMEDIATE_TICKS and (when := backend.next_change(queue, now)) is not None:
        changes.tick_due(queue.id, when)


def _remember_plan(queue: JobQueue, planned: Planned, now, *, settled: bool, sampled: dict):
    """The plan's memo (TickMemo), with the sample just written (record_sample) and the
    fair-share account carried on."""
    loaded = planned.loaded
    dispatched = planned.dispatched_before
    if loaded.full:
        waiting = len(loaded.snapshot.jobs) - dispatched
        sampled = {**sampled, "fully_planned_at": now, "fully_planned_waiting": waiting}
    TickMemo.objects.remember(
        queue.id,
        planned_version=planned.version if settled else -1,
        planned_dispatched_jobs=dispatched,
        planned_at=now,
        planned_capacity=dict(loaded.snapshot.capacity),
        planned_terms=loaded.terms,
        **sampled,
    )


SAMPLE_EVERY = timedelta(seconds=60)


def record_sample(queue: JobQueue, usage: dict | None, now) -> dict:
    """Keep the utilization history: a sample when usage changed or a minute has passed.
    Returns the memo's fields that remember the sample written ({} when none), for the
    caller's own write of the memo (TickMemo).

    With `usage` None (a tick that did not re-plan, so usage is unchanged) the last sample is
    repeated once a minute, so the chart's line reaches the present.
    """
    memo = TickMemo.of(queue)  # ticks alone write samples
    last_at, last_used = memo.sampled_at, memo.sampled_used
    if usage is None:
        if last_at is None or now - last_at < SAMPLE_EVERY:
            return {}
        usage = last_used
    elif last_at is not None and last_used == usage and now - last_at < SAMPLE_EVERY:
        return {}
    UtilizationSample.objects.create(job_queue=queue, time=now, used=usage)
    return {"sampled_used": usage, "sampled_at": now}
