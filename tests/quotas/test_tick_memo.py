"""The ticks' memo of a queue lives in its own row (TickMemo): the migration carries every
existing queue's memo over and back, and a queue no tick has planned reads as a fresh memo."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from quotaportal.quotas.models import JobQueue, TickMemo
from quotaportal.tick.run import run_tick
from tests.builders import submit

BEFORE = [("quotas", "0027_estimate_reads")]
AFTER = [("quotas", "0028_tick_memo")]
PLANNED_AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
MEMO = {
    "planned_version": 7,
    "planned_dispatched_jobs": 3,
    "planned_at": PLANNED_AT,
    "planned_capacity": {"a100": 4},
    "fully_planned_at": PLANNED_AT,
    "planned_terms": "digest",
    "fully_planned_waiting": 120,
    "sampled_used": {"vision": {"a100": 3}},
    "sampled_at": PLANNED_AT,
    "fair_use": {"vision": [3600.0, 1764581400.0, 3.0]},
}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_the_migration_carries_each_queues_memo_to_its_own_row_and_back(people, fleet):
    version = JobQueue.objects.get(pk=fleet.queue.pk).state_version
    old = _migrate(BEFORE)
    try:
        old.get_model("quotas", "JobQueue").objects.filter(pk=fleet.queue.pk).update(**MEMO)
        new = _migrate(AFTER)
        memo = new.get_model("quotas", "TickMemo").objects.values(*MEMO).get(pk=fleet.queue.pk)
        assert memo == MEMO
        queue = new.get_model("quotas", "JobQueue").objects.get(pk=fleet.queue.pk)
        assert queue.state_version == version  # the services' counter stays on the queue

        back = _migrate(BEFORE)
        row = back.get_model("quotas", "JobQueue").objects.values(*MEMO).get(pk=fleet.queue.pk)
        assert row == MEMO
    finally:
        _migrate(AFTER)


def test_a_queue_no_tick_has_planned_reads_as_a_fresh_memo(people, fleet):
    queue = JobQueue.objects.get(pk=fleet.queue.pk)
    assert not TickMemo.objects.filter(pk=queue.pk).exists()
    memo = TickMemo.of(queue)
    assert (memo.planned_version, memo.planned_at, memo.fair_use) == (-1, None, {})

    submit(people.alice, fleet)
    run_tick(queue.pk)
    memo = TickMemo.of(JobQueue.objects.select_related("tick_memo").get(pk=queue.pk))
    assert memo.planned_at is not None
    assert memo.sampled_used == {"vision": {"a100": 1}}


def test_remember_writes_only_the_fields_it_is_given(people, fleet):
    TickMemo.objects.remember(fleet.queue.pk, planned_terms="first", fully_planned_waiting=5)
    TickMemo.objects.remember(fleet.queue.pk, planned_terms="second")
    memo = TickMemo.objects.get(pk=fleet.queue.pk)
    assert (memo.planned_terms, memo.fully_planned_waiting) == ("second", 5)
