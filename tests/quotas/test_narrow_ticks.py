"""A tick that reads the heads of each share's line decides and explains as a full plan would;
the periodic full plan is read and planned outside the environment's tick lock.

The oracle is the full plan: every active job read (bridge.load_snapshot) and planned. Fleets
are random (the scheduler's property-test snapshots, written as rows); windows are tiny so the
tick runs short of lines and widens.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaportal.benchmarks.management.commands.bench_tick import seed_snapshot
from quotaportal.infra.locks import ADVISORY_LOCKS
from quotaportal.quotas import services
from quotaportal.quotas.models import Job, JobQueue, JobStatus, SchedulerRun, TickMemo
from quotaportal.tick import bridge, full_plan
from quotaportal.tick.run import run_tick
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


@pytest.mark.postgresql
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
    assert TickMemo.objects.get(pk=queue.pk).fully_planned_at is not None
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


@pytest.mark.postgresql
def test_a_tick_reads_every_job_when_the_full_plan_is_due(settings, people, fleet):
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 0
    queue = fleet.queue
    for i in range(30):
        _submit(people.alice, queue, "vision", f"v{i}")
    run_tick(queue.id)
    first_full = TickMemo.objects.get(pk=queue.pk).fully_planned_at
    services.set_priority(people.alice, Job.objects.get(name="v25"), 7)
    run_tick(queue.id)
    assert TickMemo.objects.get(pk=queue.pk).fully_planned_at == first_full  # heads only
    _assert_stored_as_a_full_plan_says(queue)
    TickMemo.objects.filter(pk=queue.pk).update(fully_planned_at=first_full - timedelta(hours=1))
    services.set_priority(people.alice, Job.objects.get(name="v25"), 8)
    run_tick(queue.id)
    assert TickMemo.objects.get(pk=queue.pk).fully_planned_at > first_full  # the safety net
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


def _twelve_waiting_read_whole_then_changed(people, queue):
    """Twelve of vision's jobs, read whole by a first tick (twelve waited as it read them),
    then one of them raised: when that full read was."""
    for i in range(12):
        _submit(people.alice, queue, "vision", f"v{i}")
    run_tick(queue.id)
    first_full = TickMemo.objects.get(pk=queue.pk).fully_planned_at
    services.set_priority(people.alice, Job.objects.get(name="v11"), 7)
    return first_full


def _read_whole_since(queue, first_full) -> bool:
    return TickMemo.objects.get(pk=queue.pk).fully_planned_at > first_full


def test_a_short_queue_is_read_whole_every_tick(settings, people, fleet):
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 20
    first_full = _twelve_waiting_read_whole_then_changed(people, fleet.queue)
    run_tick(fleet.queue.id)
    assert _read_whole_since(fleet.queue, first_full)


@pytest.mark.postgresql
@pytest.mark.parametrize(("per_share", "reads_heads"), [(5, True), (7, False)])
def test_a_queue_of_few_shares_is_read_by_its_heads_once_enough_wait_for_each(
    settings, people, fleet, per_share, reads_heads
):
    """Twelve waited at the full read, in a queue of two shares: enough at five a share, too
    few at seven, however far below QP_HEADS_FROM_WAITING."""
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 20_000
    settings.QP_HEADS_FROM_WAITING_PER_SHARE = per_share
    queue = fleet.queue
    first_full = _twelve_waiting_read_whole_then_changed(people, queue)
    assert run_tick(queue.id).replanned
    assert _read_whole_since(queue, first_full) is not reads_heads
    _assert_stored_as_a_full_plan_says(queue)


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


# -- the periodic full plan, read and planned outside the environment's tick lock ------------


@pytest.fixture
def long_queue(settings, people, fleet):
    """Thirty of vision's jobs waiting, none explained yet, in a queue whose ticks read the
    heads of its lines and whose last full plan is due (as after a full plan long ago)."""
    if connection.vendor != "postgresql":
        pytest.skip("ticks read the heads of lines on PostgreSQL only")
    settings.QP_TICK_HEADS = 1
    settings.QP_HEADS_FROM_WAITING = 10
    for i in range(30):
        _submit(people.alice, fleet.queue, "vision", f"v{i}")
    _last_full_plan_ago(fleet.queue, settings.QP_FULL_PLAN_SECONDS * 1.5, waiting=30)
    return fleet.queue


def _last_full_plan_ago(queue, seconds: float, waiting: int | None = None) -> None:
    fields = {"fully_planned_at": timezone.now() - timedelta(seconds=seconds)}
    if waiting is not None:
        fields["fully_planned_waiting"] = waiting
    TickMemo.objects.remember(queue.pk, **fields)


def _tick_lock_held(queue) -> bool:
    """Whether this connection holds the queue's environment tick lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND pid = pg_backend_pid() AND classid = %s AND objid = %s",
            [ADVISORY_LOCKS["environment_tick"], queue.service_environment_id],
        )
        return cursor.fetchone()[0] > 0


def _planning(monkeypatch, during):
    """Run `during` while the full plan plans (after its read, before it applies)."""
    real = full_plan.plan_tick

    def plan_tick(snapshot, now, **options):
        during()
        return real(snapshot, now, **options)

    monkeypatch.setattr(full_plan, "plan_tick", plan_tick)


def test_a_due_full_plan_reads_and_plans_without_the_lock_and_applies_under_it(
    long_queue, monkeypatch
):
    deep = Job.objects.get(name="v20")
    Job.objects.filter(pk=deep.pk).update(
        pending_reason="SHARE_AT_LIMIT"
    )  # a write past the services
    held_while_planning = []
    _planning(monkeypatch, lambda: held_while_planning.append(_tick_lock_held(long_queue)))
    version = JobQueue.objects.get(pk=long_queue.pk).state_version

    outcome = full_plan.plan_fully(long_queue.id)

    assert held_while_planning == [False]
    assert outcome.result == full_plan.APPLIED
    assert _tick_lock_held(long_queue)  # the application took it
    started = Job.objects.filter(job_queue=long_queue, status=JobStatus.SCHEDULED).count()
    assert started == 4  # vision borrows nlp's idle pair: every a100 in use
    assert Job.objects.get(pk=deep.pk).pending_reason == "BEHIND_SHARE_HEAD"
    memo = TickMemo.objects.get(pk=long_queue.pk)
    assert (timezone.now() - memo.fully_planned_at).total_seconds() < 60
    assert memo.fully_planned_waiting == 30
    assert (
        JobQueue.objects.get(pk=long_queue.pk).state_version == version + 1
    )  # starts move it: a full plan read before fails
    run = SchedulerRun.objects.filter(job_queue=long_queue).latest("id")
    assert (run.dispatched, run.replanned, run.error) == (4, True, "")
    _assert_stored_as_a_full_plan_says(long_queue)
    assert full_plan.plan_fully(long_queue.id).result == full_plan.NOT_DUE  # done for a while


def test_a_full_plan_whose_read_went_stale_writes_its_reasons_and_starts_nothing(
    long_queue, monkeypatch, people
):
    """A change between the read and the application (here a priority raised) may make the
    plan's starts wrong: none is made; the reasons go to jobs still waiting, and the next tick
    plans again from the heads of the lines."""
    head = Job.objects.get(name="v0")
    raised = Job.objects.get(name="v29")
    _planning(monkeypatch, lambda: services.set_priority(people.alice, raised, 90))

    outcome = full_plan.plan_fully(long_queue.id)

    assert outcome.result == full_plan.REASONS_ONLY
    assert not Job.objects.filter(job_queue=long_queue).exclude(status=JobStatus.RUNNABLE)
    assert Job.objects.get(name="v20").pending_reason == "BEHIND_SHARE_HEAD"
    assert Job.objects.get(pk=head.pk).pending_reason == ""  # the plan would have started it
    memo = TickMemo.objects.get(pk=long_queue.pk)
    assert memo.planned_version == -1
    assert memo.fully_planned_waiting == 30

    run = run_tick(long_queue.id)  # reads the heads: the raised job is one now
    assert (run.replanned, run.dispatched) == (True, 4)
    assert Job.objects.get(pk=raised.pk).status == JobStatus.SCHEDULED
    assert TickMemo.objects.get(pk=long_queue.pk).fully_planned_at == memo.fully_planned_at
    _assert_stored_as_a_full_plan_says(long_queue)


def test_ticks_leave_the_full_plan_to_the_workers_until_it_is_twice_overdue(
    long_queue, settings, people
):
    queue = long_queue
    before = TickMemo.objects.get(pk=queue.pk).fully_planned_at
    TickMemo.objects.filter(pk=queue.pk).update(planned_terms=_terms_now(queue))
    run_tick(queue.id)  # 1.5 periods: a tick reads the heads alone
    assert TickMemo.objects.get(pk=queue.pk).fully_planned_at == before
    _last_full_plan_ago(queue, settings.QP_FULL_PLAN_SECONDS * 2.5)
    services.set_priority(people.alice, Job.objects.get(name="v25"), 7)
    run_tick(queue.id)  # no worker made it: the tick does
    assert TickMemo.objects.get(pk=queue.pk).fully_planned_at > before
    _assert_stored_as_a_full_plan_says(queue)


def _terms_now(queue) -> str:
    return bridge.queue_terms(JobQueue.objects.get(pk=queue.pk)).digest


def test_only_long_queues_whose_full_plan_is_due_are_planned(long_queue, settings):
    _last_full_plan_ago(long_queue, settings.QP_FULL_PLAN_SECONDS * 0.5)
    assert full_plan.plan_due_queues() == []  # planned fully not long ago
    _last_full_plan_ago(long_queue, settings.QP_FULL_PLAN_SECONDS * 1.5, waiting=5)
    assert full_plan.plan_due_queues() == []  # short: its ticks read it whole
    _last_full_plan_ago(long_queue, settings.QP_FULL_PLAN_SECONDS * 1.5, waiting=30)
    [outcome] = full_plan.plan_due_queues()
    assert (outcome.queue_id, outcome.result) == (long_queue.id, full_plan.APPLIED)
    settings.QP_FULL_PLAN_SECONDS = 0  # every tick reads every job: nothing to do here
    _last_full_plan_ago(long_queue, 3600)
    assert full_plan.plan_due_queues() == []
