"""The tick: pending reasons written back, runs recorded, locks honoured, plans checked."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from quotaportal.quotas import services
from quotaportal.quotas.locks import ADVISORY_LOCKS
from quotaportal.quotas.models import Job, SchedulerRun
from scheduler import Dispatch, Plan
from tests.conftest import submit


def test_a_tick_dispatches_and_explains_every_waiting_job(people, fleet):
    jobs = [submit(people.alice, fleet, name=f"v{i}", quantity=2) for i in range(3)]
    run = services.run_tick(fleet.queue.id)
    assert (run.dispatched, run.preempted, run.replanned, run.skipped) == (2, 0, True, False)
    waiting = Job.objects.get(pk=jobs[2].pk)
    assert (waiting.pending_reason, waiting.position_in_share, waiting.position_in_queue) == (
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
    services.run_tick(fleet.queue.id)
    services.run_tick(fleet.queue.id)  # RUNNING now; planned and settled
    assert services.run_tick(fleet.queue.id).replanned is False
    submit(people.alice, fleet, name="second")
    run = services.run_tick(fleet.queue.id)
    assert (run.replanned, run.dispatched) == (True, 1)


def test_capacity_changes_are_noticed_without_a_service_call(people, fleet):
    job = submit(people.alice, fleet, quantity=4)
    fleet.env.capacity_limits.update(max_capacity=2)  # like a host disappearing
    services.run_tick(fleet.queue.id)
    services.run_tick(fleet.queue.id)
    fleet.env.capacity_limits.update(max_capacity=4)
    assert services.run_tick(fleet.queue.id).dispatched == 1
    assert Job.objects.get(pk=job.pk).status == "SCHEDULED"


@pytest.mark.django_db(transaction=True)
def test_a_tick_is_skipped_while_another_holds_the_queue_lock(people, fleet):
    held, release = threading.Event(), threading.Event()

    def hold_lock():
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)",
                [ADVISORY_LOCKS["queue_tick"], fleet.queue.id],
            )
            held.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    held.wait(10)
    try:
        assert services.run_tick(fleet.queue.id).skipped is True
    finally:
        release.set()
        holder.join()
    assert services.run_tick(fleet.queue.id).skipped is False


def test_an_invalid_plan_is_not_applied_and_is_recorded(people, fleet, monkeypatch):
    jobs = [submit(people.alice, fleet, name=f"v{i}", quantity=4) for i in range(2)]

    def overbook(snapshot, now):
        return Plan(now, tuple(Dispatch(str(j.pk)) for j in jobs), {})

    monkeypatch.setattr("quotaportal.quotas.services.tick.plan_tick", overbook)
    run = services.run_tick(fleet.queue.id)
    assert "invalid plan, nothing applied" in run.error
    assert "over capacity" in run.error
    assert not Job.objects.exclude(status="RUNNABLE").exists()
    assert SchedulerRun.objects.filter(error__startswith="invalid plan").count() == 1
