"""A tick that reads the heads of each share's line decides and explains as a full plan would.

The oracle is the full plan: every active job read (bridge.load_snapshot) and planned. Fleets
are random (the scheduler's property-test snapshots, written as rows); windows are tiny so the
tick runs short of lines and widens.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaportal.benchmarks.management.commands.bench_tick import seed_snapshot
from quotaportal.quotas import bridge, services
from quotaportal.quotas.models import Job, JobQueue, JobStatus
from quotaportal.quotas.ticking.run import run_tick
from scheduler import Ordering, plan_tick
from tests.scheduler.builders import snapshots

pytestmark = pytest.mark.django_db(transaction=False)


class _RolledBack(Exception):
    pass


def _full_plan(queue: JobQueue, now):
    loaded = bridge.load_snapshot(queue, now)
    return loaded, plan_tick(loaded.snapshot, now.timestamp(), positions=False)


def _reasons(plan) -> dict[str, str]:
    return {job_id: str(p.reason) for job_id, p in plan.pending.items()}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(snapshots(), st.integers(1, 3))
def test_the_heads_read_plans_what_the_full_read_plans(snapshot, first):
    strict = replace(snapshot, ordering=Ordering.STRICT, fit_to={})
    try:
        with transaction.atomic():
            queue = seed_snapshot(strict)
            now = timezone.now()
            _, full = _full_plan(queue, now)
            loaded, narrow = bridge.plan_heads(queue, now, bridge.queue_terms(queue), first)
            assert narrow.dispatches == full.dispatches
            assert narrow.evictions == full.evictions
            # It explains the jobs it read; nothing was explained yet, so that is every job.
            assert _reasons(narrow) == _reasons(full)
            assert loaded.reads >= 1
            raise _RolledBack
    except _RolledBack:
        pass


def _submit(person, queue, share: str, name: str, priority: int = 0, quantity: int = 1):
    return services.submit_job(
        person,
        job_queue=queue,
        quota_share=share,
        capacity_unit="a100",
        name=name,
        scheduling_priority=priority,
        quantity=quantity,
    )


def _stored_reasons(queue) -> dict[str, str]:
    rows = Job.objects.filter(
        job_queue=queue, status=JobStatus.RUNNABLE, preemption_stopping=False
    ).values_list("id", "pending_reason")
    return {str(job_id): reason for job_id, reason in rows}


def _assert_stored_as_a_full_plan_says(queue):
    now = timezone.now()
    _, full = _full_plan(queue, now)
    assert not full.dispatches, "the tick left something to start"
    assert _stored_reasons(queue) == _reasons(full)


def test_reasons_stay_true_through_ticks_that_read_only_the_heads(settings, people, fleet):
    """Jobs arrive ahead of and behind the heads, jump the line, fall back, are terminated
    and preempted; after each tick (each reading two jobs of a line) every stored reason is
    what a full plan gives."""
    settings.QP_TICK_HEADS = 2
    settings.QP_HEADS_FROM_WAITING = 0
    queue = fleet.queue
    alice, bob = people.alice, people.bob
    jobs = [_submit(alice, queue, "vision", f"v{i}") for i in range(12)]
    run_tick(queue.id)
    assert JobQueue.objects.get(pk=queue.pk).fully_planned_at is not None
    _assert_stored_as_a_full_plan_says(queue)

    def tick_and_check():
        run = run_tick(queue.id)
        assert run.replanned
        _assert_stored_as_a_full_plan_says(queue)

    waiting = [j for j in jobs if Job.objects.get(pk=j.pk).status == JobStatus.RUNNABLE]
    services.set_priority(alice, waiting[-1], 50)  # from the back to the head
    tick_and_check()
    services.set_priority(alice, waiting[-1], 0)  # and back behind the others
    tick_and_check()
    for i in range(3):  # ahead of the line, then behind it
        _submit(alice, queue, "vision", f"urgent{i}", priority=90)
        _submit(alice, queue, "vision", f"late{i}")
    tick_and_check()
    _submit(bob, queue, "nlp", "n0", quantity=2)  # another share, lending to the first
    tick_and_check()
    head = Job.objects.filter(job_queue=queue, status=JobStatus.RUNNABLE).order_by(
        "-scheduling_priority", "created_at", "id"
    )[0]
    services.terminate_job(alice, head, "not needed")
    tick_and_check()
    for job in Job.objects.filter(job_queue=queue, status__in=("SCHEDULED", "RUNNING")):
        services.terminate_job(alice if job.share_name == "vision" else bob, job, "make room")
    tick_and_check()


def test_a_tick_reads_every_job_when_the_full_plan_is_due(settings, people, fleet):
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 0
    queue = fleet.queue
    for i in range(30):
        _submit(people.alice, queue, "vision", f"v{i}")
    run_tick(queue.id)
    first_full = JobQueue.objects.get(pk=queue.pk).fully_planned_at
    services.set_priority(people.alice, Job.objects.get(name="v25"), 7)
    run_tick(queue.id)
    assert JobQueue.objects.get(pk=queue.pk).fully_planned_at == first_full  # heads only
    _assert_stored_as_a_full_plan_says(queue)
    JobQueue.objects.filter(pk=queue.pk).update(fully_planned_at=first_full - timedelta(hours=1))
    services.set_priority(people.alice, Job.objects.get(name="v25"), 8)
    run_tick(queue.id)
    assert JobQueue.objects.get(pk=queue.pk).fully_planned_at > first_full  # the safety net
    _assert_stored_as_a_full_plan_says(queue)


def test_a_new_job_behind_the_heads_is_explained_and_a_quiet_queue_is_left_alone(
    settings, people, fleet
):
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 0
    queue = fleet.queue
    for i in range(6):
        _submit(people.alice, queue, "vision", f"v{i}")
    run_tick(queue.id)  # starts what it can
    run_tick(queue.id)  # plans again after a change, and finds nothing more to do
    assert not run_tick(queue.id).replanned  # nothing changed
    late = _submit(people.alice, queue, "vision", "late")
    assert run_tick(queue.id).replanned  # a job no tick has explained is a change
    assert Job.objects.get(pk=late.pk).pending_reason == "BEHIND_SHARE_HEAD"
    assert not run_tick(queue.id).replanned


def test_a_short_queue_is_read_whole_every_tick(settings, people, fleet):
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 20
    queue = fleet.queue
    for i in range(12):
        _submit(people.alice, queue, "vision", f"v{i}")
    run_tick(queue.id)  # 12 waited as it read them
    first_full = JobQueue.objects.get(pk=queue.pk).fully_planned_at
    services.set_priority(people.alice, Job.objects.get(name="v11"), 7)
    run_tick(queue.id)
    assert JobQueue.objects.get(pk=queue.pk).fully_planned_at > first_full


def test_a_head_pushed_back_behind_the_heads_read_is_explained_again(settings, people, fleet):
    settings.QP_TICK_HEADS = 2
    settings.QP_HEADS_FROM_WAITING = 0
    queue = fleet.queue
    for i in range(5):
        _submit(people.bob, queue, "nlp", f"n{i}")
    run_tick(queue.id)
    old_head = Job.objects.get(name="n2")
    assert old_head.pending_reason == "SHARE_AT_LIMIT"  # nlp LENDs and holds its limit
    _submit(people.bob, queue, "nlp", "urgent0", priority=50)
    _submit(people.bob, queue, "nlp", "urgent1", priority=50)
    run_tick(queue.id)  # reads two jobs of nlp's line: the urgent ones
    assert Job.objects.get(pk=old_head.pk).pending_reason == "BEHIND_SHARE_HEAD"
    _assert_stored_as_a_full_plan_says(queue)
