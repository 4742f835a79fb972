"""The periodic full plan of a long queue is read and planned outside the environment's tick
lock, and applied under it only when what it read still holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from quotaportal.infra.locks import ADVISORY_LOCKS
from quotaportal.quotas import bridge, services
from quotaportal.quotas.models import Job, JobQueue, JobStatus, SchedulerRun
from quotaportal.quotas.ticking import full_plan
from quotaportal.quotas.ticking.run import run_tick
from tests.quotas.test_narrow_ticks import _assert_stored_as_a_full_plan_says, _submit

pytestmark = pytest.mark.django_db


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
    JobQueue.objects.filter(pk=queue.pk).update(**fields)


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
    queue = JobQueue.objects.get(pk=long_queue.pk)
    assert (timezone.now() - queue.fully_planned_at).total_seconds() < 60
    assert queue.fully_planned_waiting == 30
    assert queue.state_version == version + 1  # starts move it: a full plan read before fails
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
    queue = JobQueue.objects.get(pk=long_queue.pk)
    assert queue.planned_version == -1
    assert queue.fully_planned_waiting == 30

    run = run_tick(long_queue.id)  # reads the heads: the raised job is one now
    assert (run.replanned, run.dispatched) == (True, 4)
    assert Job.objects.get(pk=raised.pk).status == JobStatus.SCHEDULED
    assert JobQueue.objects.get(pk=long_queue.pk).fully_planned_at == queue.fully_planned_at
    _assert_stored_as_a_full_plan_says(long_queue)


def test_ticks_leave_the_full_plan_to_the_workers_until_it_is_twice_overdue(
    long_queue, settings, people
):
    queue = long_queue
    before = JobQueue.objects.get(pk=queue.pk).fully_planned_at
    JobQueue.objects.filter(pk=queue.pk).update(planned_terms=_terms_now(queue))
    run_tick(queue.id)  # 1.5 periods: a tick reads the heads alone
    assert JobQueue.objects.get(pk=queue.pk).fully_planned_at == before
    _last_full_plan_ago(queue, settings.QP_FULL_PLAN_SECONDS * 2.5)
    services.set_priority(people.alice, Job.objects.get(name="v25"), 7)
    run_tick(queue.id)  # no worker made it: the tick does
    assert JobQueue.objects.get(pk=queue.pk).fully_planned_at > before
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
