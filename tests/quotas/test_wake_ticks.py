"""A SIMULATED job's start and end bring a tick at their instant (as an agent's report would),
one waiting per environment; and a tick's own changes ask for no second tick."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.utils import timezone

from quotaportal.infra.locks import ADVISORY_LOCKS
from quotaportal.quotas import tasks
from quotaportal.quotas.models import Job
from quotaportal.quotas.tasks import tick_queue, tick_queue_at, tick_queue_now
from quotaportal.simulated.backend import SimulatedBackend
from quotaportal.tick import requests as ticks
from quotaportal.tick.run import run_tick
from quotaportal.whatif import estimates
from tests.builders import submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(settings, monkeypatch):
    """What reaches the broker (no worker takes it): ('now', queue) or ('at', queue, eta)."""
    settings.QP_IMMEDIATE_TICKS = True
    settings.REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
    store = redis.Redis.from_url(settings.REDIS_URL)
    messages = []
    monkeypatch.setattr(
        tick_queue_now, "delay", lambda queue_id: messages.append(("now", queue_id))
    )
    monkeypatch.setattr(
        tick_queue_now,
        "apply_async",
        lambda args, countdown: messages.append(("later", args[0], countdown)),
    )
    monkeypatch.setattr(
        tick_queue_at, "apply_async", lambda args, eta: messages.append(("at", args[0], eta))
    )
    yield messages
    for env_id in ticks._environments.values():
        store.delete(ticks._wake_key(env_id), ticks._key(env_id), ticks._ticked_key(env_id))


def _backend_next_change(fleet, now):
    return SimulatedBackend().next_change(fleet.queue, now)


def test_next_change_is_now_for_a_dispatched_job_and_the_soonest_end_for_running_ones(
    people, fleet
):
    now = timezone.now()
    assert _backend_next_change(fleet, now) is None, "nothing dispatched, nothing due"
    short = submit(people.alice, fleet, name="short", simulated_duration_seconds=30)
    submit(people.alice, fleet, name="long", simulated_duration_seconds=90)
    submit(people.alice, fleet, name="forever")  # no duration: it never ends by itself
    run_tick(fleet.queue.pk, now=now)
    assert _backend_next_change(fleet, now) == now, "dispatched jobs start at the next tick"
    later = now + timedelta(seconds=1)
    run_tick(fleet.queue.pk, now=later)  # they are RUNNING now
    assert Job.objects.filter(job_queue=fleet.queue, status="RUNNING").count() == 3
    assert _backend_next_change(fleet, later) == later + timedelta(seconds=30)
    run_tick(fleet.queue.pk, now=later + timedelta(seconds=30))
    assert Job.objects.get(pk=short.pk).status == "SUCCEEDED"
    assert _backend_next_change(fleet, later) == later + timedelta(seconds=90)


def test_one_wake_waits_per_environment_the_earliest_and_a_due_one_is_the_immediate_tick(
    people, fleet, sent
):
    queue = fleet.queue.pk
    soon = timezone.now() + timedelta(seconds=20)
    ticks.schedule_wake(queue, soon)
    ticks.schedule_wake(queue, soon + timedelta(seconds=5))  # the first wake asks for it
    assert sent == [("at", queue, soon)]
    sooner = soon - timedelta(seconds=10)
    ticks.schedule_wake(queue, sooner)
    assert sent[-1] == ("at", queue, sooner), "an earlier instant goes first"
    ticks.schedule_wake(queue, timezone.now() - timedelta(milliseconds=1))
    ticks.schedule_wake(queue, timezone.now())
    assert sent[2:] == [("now", queue)], "a due wake is the immediate tick, coalesced"
    ticks.schedule_wake(queue, timezone.now() + timedelta(hours=2))
    assert len(sent) == 3, "far beyond the beat period: the beat ticks first"


def test_a_tick_asks_for_the_start_then_the_end_and_its_own_ends_ask_for_no_other_tick(
    people, fleet, sent
):
    job = submit(people.alice, fleet, name="one", simulated_duration_seconds=40)
    assert sent == [("now", fleet.queue.pk)], "the submit's immediate tick"
    ticks.gate.release(fleet.queue.pk)  # as the task does when it starts
    start = timezone.now()
    run_tick(fleet.queue.pk, now=start)
    assert sent[-1] == ("now", fleet.queue.pk), "the dispatched job starts at the next tick"
    ticks.gate.release(fleet.queue.pk)
    started = timezone.now()
    run_tick(fleet.queue.pk, now=started)
    assert sent[-1] == ("at", fleet.queue.pk, started + timedelta(seconds=40))
    before = len(sent)
    run_tick(fleet.queue.pk, now=started + timedelta(seconds=40))
    assert Job.objects.get(pk=job.pk).status == "SUCCEEDED"
    assert len(sent) == before, "the tick that ended it planned at once: no tick asked for"


def test_a_workers_tick_starts_what_it_dispatched_itself_then_asks_the_broker_for_the_end(
    people, fleet, sent
):
    """Through the broker, the start's tick came 45-50 ms after the tick that dispatched:
    the worker that dispatched runs it at once, and only the end goes to the broker."""
    job = submit(people.alice, fleet, name="one", simulated_duration_seconds=40)
    assert sent == [("now", fleet.queue.pk)]
    tick_queue_now.run(fleet.queue.pk)  # the task's body, as the worker runs it
    job.refresh_from_db()
    assert job.status == "RUNNING", "started by the tick that followed in the same task"
    assert job.started_at > job.scheduled_at, "on a tick of its own, after the dispatch"
    assert [m[0] for m in sent[1:]] == ["at"], "no start tick sent; the end's is"
    assert sent[-1][2] == job.started_at + timedelta(seconds=40)


def test_follow_up_ticks_are_bounded_and_the_rest_go_to_the_broker(
    people, fleet, sent, monkeypatch
):
    monkeypatch.setattr(tasks, "MAX_FOLLOW_UPS", 1)  # the asking tick only
    job = submit(people.alice, fleet, name="one", simulated_duration_seconds=40)
    ticks.gate.release(fleet.queue.pk)
    tick_queue_now.run(fleet.queue.pk)
    job.refresh_from_db()
    assert job.status == "SCHEDULED"
    assert len(sent) == 2, "the submit's tick, then the start's: not lost"
    assert sent[1][:2] == ("later", fleet.queue.pk), "spaced after the tick that asked"


def test_a_follow_up_asked_for_before_a_failure_goes_to_the_broker(people, fleet, sent):
    job = submit(people.alice, fleet, name="one", simulated_duration_seconds=40)
    ticks.gate.release(fleet.queue.pk)

    def tick_then_fail(queue_id):
        run_tick(queue_id)  # dispatches, commits, asks for the start's tick
        raise RuntimeError("the worker fails after the commit (Redis down, say)")

    with pytest.raises(RuntimeError):
        tasks._with_follow_ups(fleet.queue.pk, tick_then_fail)
    assert Job.objects.get(pk=job.pk).status == "SCHEDULED"
    assert sent == [("now", fleet.queue.pk)] * 2, "the submit's tick, then the start's: not lost"


def test_the_beats_tick_is_skipped_for_half_a_period_after_the_environment_ticked(
    people, fleet, sent, settings
):
    run_tick(fleet.queue.pk)  # a tick of the environment (an immediate or wake tick)
    job = submit(people.alice, fleet, name="one", simulated_duration_seconds=40)
    tick_queue.run(fleet.queue.pk)
    job.refresh_from_db()
    assert job.status == "RUNNABLE", "ticked lately: the beat's tick is redundant"
    redis.Redis.from_url(settings.REDIS_URL).delete(ticks._ticked_key(fleet.env.pk))
    tick_queue.run(fleet.queue.pk)  # half a period later
    job.refresh_from_db()
    assert job.status in ("SCHEDULED", "RUNNING")


def test_without_a_broker_the_embedded_loop_sleeps_only_until_the_wake(people, fleet, settings):
    from quotaportal.tick.loop import SchedulerLoop

    settings.QP_IMMEDIATE_TICKS = True
    tick_queue_now.app.conf.task_always_eager = True  # as without REDIS_URL
    try:
        soon = timezone.now() + timedelta(seconds=3)
        ticks.schedule_wake(fleet.queue.pk, soon + timedelta(seconds=1))
        ticks.schedule_wake(fleet.queue.pk, soon)
    finally:
        tick_queue_now.app.conf.task_always_eager = False
    pause = SchedulerLoop(period=30).pause()
    assert 1 < pause <= 3, "the loop wakes for the job's end, not its 30 s period"
    assert SchedulerLoop(period=30).pause() == 30, "each wake is used once"


def test_estimates_wait_for_a_tick_in_progress_instead_of_writing_beside_it(
    people, fleet, monkeypatch
):
    """Two writers of many job rows in different orders deadlock: estimates take the
    environment's tick lock, and write nothing this time if it does not come."""
    for i in range(6):
        submit(people.alice, fleet, name=f"w{i}", simulated_duration_seconds=60)
    run_tick(fleet.queue.pk)
    monkeypatch.setattr(estimates, "STORE_LOCK_SECONDS", 0.2)
    holder = connection.copy()  # another session, as a tick in another worker would be
    try:
        with holder.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_lock(%s, %s)",
                [ADVISORY_LOCKS["environment_tick"], fleet.env.pk],
            )
        estimates.refresh_estimates(fleet.queue)
        assert not Job.objects.filter(estimated_start_at__isnull=False).exists()
        with holder.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_unlock(%s, %s)",
                [ADVISORY_LOCKS["environment_tick"], fleet.env.pk],
            )
    finally:
        holder.close()
    estimates.refresh_estimates(fleet.queue)
    assert Job.objects.filter(status="RUNNABLE", estimated_start_at__isnull=False).count() == 2


def test_one_paced_estimate_refresh_at_a_time_and_each_followed_by_rest(people, fleet, monkeypatch):
    """Refreshes back to back on every worker process left none to tick (the Kueue-shape
    replay took over 900 s, not 86): a refresh runs only while no other does, and a process
    rests REST_FACTOR times as long as its last refresh took."""
    for i in range(6):  # four start, two wait
        submit(people.alice, fleet, name=f"w{i}", simulated_duration_seconds=60)
    run_tick(fleet.queue.pk)
    assert Job.objects.filter(status="RUNNABLE").count() == 2
    estimates._Pace.clear()
    holder = connection.copy()  # another worker's refresh in progress
    key = [ADVISORY_LOCKS["estimate_refresh"], 0]
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", key)
        assert estimates.refresh_paced() is None
        assert not Job.objects.filter(estimated_start_at__isnull=False).exists()
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", key)
    finally:
        holder.close()

    monkeypatch.setattr(estimates, "REST_FACTOR", 3600.0)  # rest an hour a second of work
    try:
        assert estimates.refresh_paced() >= 1
        assert Job.objects.filter(estimated_start_at__isnull=False).exists()
        Job.objects.update(estimated_start_at=None)
        assert estimates.refresh_paced() is None, "resting after its refresh"
        assert not Job.objects.filter(estimated_start_at__isnull=False).exists()
        assert estimates.refresh_all_estimates() >= 1, "an unpaced refresh (a test, a command) runs"
    finally:
        estimates._Pace.clear()


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="worker processes share through Redis")
def test_every_worker_process_rests_after_a_paced_refresh(people, fleet, monkeypatch):
    """Each process resting on its own let two worker processes refresh estimates twice as
    often as REST_FACTOR allows: the rest is kept where every process sees it."""
    submit(people.alice, fleet, name="waits", simulated_duration_seconds=60)
    estimates._Pace.clear()
    monkeypatch.setattr(estimates, "REST_FACTOR", 3600.0)
    try:
        assert estimates.refresh_paced() >= 1
        monkeypatch.setattr(estimates._Pace, "local_until", 0.0)  # another process's clock
        assert estimates.refresh_paced() is None
        estimates._Pace.clear()
        assert estimates.refresh_paced() >= 1, "once the rest is over, any process refreshes"
    finally:
        estimates._Pace.clear()
