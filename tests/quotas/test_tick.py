"""The tick: pending reasons written back, runs recorded, locks honoured, plans checked."""

from __future__ import annotations

import gc
import threading

import pytest
from django.db import connection, transaction

from quotaportal.infra.locks import ADVISORY_LOCKS
from quotaportal.quotas import services
from quotaportal.quotas.models import Job, JobQueue, SchedulerRun
from quotaportal.quotas.selectors import job_positions
from quotaportal.tick import bridge
from quotaportal.tick.run import run_tick
from scheduler import Dispatch, InvariantViolation, Plan, plan_tick
from tests.builders import submit


def test_a_tick_dispatches_and_explains_every_waiting_job(people, fleet):
    jobs = [submit(people.alice, fleet, name=f"v{i}", quantity=2) for i in range(3)]
    run = run_tick(fleet.queue.id)
    assert (run.dispatched, run.preempted, run.replanned, run.skipped) == (2, 0, True, False)
    waiting = Job.objects.get(pk=jobs[2].pk)
    assert (waiting.pending_reason, *job_positions([waiting])[waiting.pk]) == (
        "NOTHING_TO_BORROW",
        1,
        1,
    )
    started = Job.objects.get(pk=jobs[0].pk)
    assert (started.status, started.status_reason) == (
        "SCHEDULED",
        "Dispatched within the quota share's limit",
    )
    assert Job.objects.get(pk=jobs[1].pk).status_reason == "Dispatched on borrowed idle capacity"


def test_a_tick_with_nothing_changed_skips_planning_until_something_changes(people, fleet):
    submit(people.alice, fleet, quantity=2)
    run_tick(fleet.queue.id)
    run_tick(fleet.queue.id)  # RUNNING now; planned and settled
    assert run_tick(fleet.queue.id).replanned is False
    version = JobQueue.objects.get(pk=fleet.queue.pk).state_version
    submit(people.alice, fleet, name="second")
    # The submit did not move the version: the active-job count tells the tick.
    assert JobQueue.objects.get(pk=fleet.queue.pk).state_version == version
    run = run_tick(fleet.queue.id)
    assert (run.replanned, run.dispatched) == (True, 1)


def test_a_job_moved_around_the_services_makes_the_next_tick_plan_again(people, fleet):
    job = submit(people.alice, fleet, quantity=2)
    run_tick(fleet.queue.id)
    run_tick(fleet.queue.id)
    assert run_tick(fleet.queue.id).replanned is False
    # A write that bypassed the services: the version stays, the dispatched count does not.
    Job.objects.filter(pk=job.pk).update(status="RUNNABLE", pending_reason="WAITING_FOR_CAPACITY")
    run = run_tick(fleet.queue.id)
    assert (run.replanned, run.dispatched) == (True, 1)


def test_a_tick_with_nothing_changed_costs_a_dozen_statements(
    people, fleet, django_assert_max_num_queries
):
    """Every queue pays it on every tick: the queue's version, its dispatched jobs' count and
    whether a new job waits come in one statement, a SIMULATED queue's starts and ends in one
    read, and the queue's environment is remembered."""
    for i in range(3):
        submit(people.alice, fleet, name=f"v{i}", quantity=2)
    for _ in range(3):
        run_tick(fleet.queue.id)
    with django_assert_max_num_queries(14):
        assert run_tick(fleet.queue.id).replanned is False


def test_capacity_changes_are_noticed_without_a_service_call(people, fleet):
    job = submit(people.alice, fleet, quantity=4)
    fleet.env.capacity_limits.update(max_capacity=2)  # like a host disappearing
    run_tick(fleet.queue.id)
    run_tick(fleet.queue.id)
    fleet.env.capacity_limits.update(max_capacity=4)
    assert run_tick(fleet.queue.id).dispatched == 1
    assert Job.objects.get(pk=job.pk).status == "SCHEDULED"


def test_a_job_whose_unit_no_share_limits_any_more_waits_with_that_reason(people, fleet):
    job = submit(people.alice, fleet)
    services.create_capacity_unit(people.admin, name="h100")
    for share in (fleet.vision, fleet.nlp):  # limits moved to another unit after the submit
        services.update_share(people.admin, share, capacity_limits={"h100": 2})
    run = run_tick(fleet.queue.id)
    assert (run.dispatched, run.error) == (0, "")
    assert Job.objects.get(pk=job.pk).pending_reason == "NO_CAPACITY_LIMIT_FOR_UNIT"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_a_tick_is_skipped_while_another_holds_the_queue_lock(people, fleet):
    held, release = threading.Event(), threading.Event()

    def hold_lock():
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)",
                [ADVISORY_LOCKS["environment_tick"], fleet.env.id],
            )
            held.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    held.wait(10)
    try:
        assert run_tick(fleet.queue.id).skipped is True
    finally:
        release.set()
        holder.join()
    assert run_tick(fleet.queue.id).skipped is False


def test_an_invalid_plan_is_not_applied_and_is_recorded(people, fleet, monkeypatch):
    jobs = [submit(people.alice, fleet, name=f"v{i}", quantity=4) for i in range(2)]

    def overbook(snapshot, now, **options):
        return Plan(now, tuple(Dispatch(str(j.pk)) for j in jobs), {})

    monkeypatch.setattr("quotaportal.tick.run.plan_tick", overbook)
    run = run_tick(fleet.queue.id)
    assert "invalid plan, nothing applied" in run.error
    assert "over capacity" in run.error
    assert not Job.objects.exclude(status="RUNNABLE").exists()
    assert SchedulerRun.objects.filter(error__startswith="invalid plan").count() == 1


@pytest.mark.parametrize("plan_fails", [False, True])
def test_the_cycle_collector_is_off_while_a_tick_plans_and_on_again_after(
    people, fleet, monkeypatch, plan_fails
):
    submit(people.alice, fleet, name="planned")
    seen = []

    def planning(snapshot, now, **options):
        seen.append(gc.isenabled())
        if plan_fails:
            raise InvariantViolation("a plan that fails")
        return plan_tick(snapshot, now, **options)

    monkeypatch.setattr("quotaportal.tick.run.plan_tick", planning)
    assert gc.isenabled()
    run = run_tick(fleet.queue.id)
    assert seen == [False]
    assert gc.isenabled()
    assert bool(run.error) is plan_fails


def test_a_tick_leaves_a_collector_turned_off_elsewhere_off(people, fleet):
    submit(people.alice, fleet, name="planned")
    gc.disable()
    try:
        run_tick(fleet.queue.id)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_positions_computed_on_read_match_the_planner(people, fleet):
    from scheduler import plan_tick

    services.update_share(people.admin, fleet.nlp, sharing_strategy="LEND_AND_BORROW")
    for i in range(7):
        submit(people.alice, fleet, name=f"v{i}", scheduling_priority=i % 3, quantity=1 + i % 2)
        submit(people.bob, fleet, share="nlp", name=f"n{i}", scheduling_priority=i % 2)
    for _ in range(4):
        run_tick(fleet.queue.id)
    plan = plan_tick(bridge.load_snapshot(fleet.queue).snapshot, 0.0)
    runnable = list(Job.objects.filter(status="RUNNABLE"))
    assert len(runnable) == len(plan.pending) > 5
    on_read = job_positions(runnable)
    for job in runnable:
        pending = plan.pending[str(job.pk)]
        assert on_read[job.pk] == (pending.position_in_share, pending.position_in_queue)


def test_listing_jobs_costs_the_same_queries_for_any_page_size(
    people, fleet, django_assert_max_num_queries
):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(people.alice)
    for i in range(40):
        submit(people.alice, fleet, name=f"v{i}")
    run_tick(fleet.queue.id)
    with django_assert_max_num_queries(12) as small:
        assert len(client.get("/api/v1/jobs/?limit=5&offset=35").json()["results"]) == 5
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert len(client.get("/api/v1/jobs/?limit=40").json()["results"]) == 40


def test_the_active_jobs_are_read_as_columns(people, fleet):
    assert bridge.active_columns(fleet.queue.id) == ([],) * 8  # an empty queue: no NULLs
    started = submit(people.alice, fleet, name="started", quantity=2, scheduling_priority=7)
    waiting = submit(people.alice, fleet, name="waiting", quantity=4)
    run_tick(fleet.queue.id)
    ids, shares, units, quantities, priorities, created, dispatched, reasons = (
        bridge.active_columns(fleet.queue.id)
    )
    rows = zip(quantities, priorities, dispatched, reasons, strict=True)
    by_id = dict(zip(ids, rows, strict=True))
    assert set(shares) == {fleet.vision.id}
    assert len(set(units)) == 1
    assert all(isinstance(t, float) for t in created)
    quantity, priority, dispatched_at, _ = by_id[str(started.pk)]
    assert (quantity, priority) == (2, 7)
    assert isinstance(dispatched_at, float)
    quantity, priority, dispatched_at, reason = by_id[str(waiting.pk)]
    assert (quantity, priority, dispatched_at) == (4, 0, None)
    assert reason == Job.objects.get(pk=waiting.pk).pending_reason != ""
