"""update_rows and update_objects: each row gets its own values in one statement, and a row
that no longer meets the condition keeps its own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from quotaportal.infra.bulk import (
    insert_new,
    per_row,
    update_objects,
    update_returning,
    update_rows,
)
from quotaportal.quotas.models import CapacityUnit, Event, Job, JobStatus
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_each_row_gets_its_own_values_in_one_statement(people, fleet):
    jobs = [submit(people.alice, fleet, name=f"j{n}") for n in range(3)]
    start = timezone.now()
    times = [start + timedelta(seconds=n) for n in range(3)]
    with CaptureQueriesContext(connection) as queries:
        updated = update_rows(
            Job,
            [j.pk for j in jobs],
            {"status_reason": ["a", "b's", "c"], "started_at": times},
        )
    assert updated == 3
    if connection.vendor == "postgresql":
        assert len(queries) == 1
    rows = {j.pk: j for j in Job.objects.filter(pk__in=[j.pk for j in jobs])}
    assert [rows[j.pk].status_reason for j in jobs] == ["a", "b's", "c"]
    assert [rows[j.pk].started_at for j in jobs] == times


def test_a_foreign_key_is_set_by_its_id_name(people, fleet):
    jobs = [submit(people.alice, fleet, name=f"j{n}") for n in range(2)]
    share = jobs[0].quota_share_id
    assert update_rows(Job, [j.pk for j in jobs], {"quota_share_id": [None, share]}) == 2
    assert [Job.objects.get(pk=j.pk).quota_share_id for j in jobs] == [None, share]


def test_a_row_that_fails_the_condition_keeps_its_values(people, fleet):
    waiting, ended = submit(people.alice, fleet, name="waiting"), submit(people.alice, fleet)
    Job.objects.filter(pk=ended.pk).update(status=JobStatus.SUCCEEDED)
    updated = update_rows(
        Job,
        [waiting.pk, ended.pk],
        {"pending_reason": ["BEHIND_SHARE_HEAD", "BEHIND_SHARE_HEAD"]},
        only_if=("status", [JobStatus.RUNNABLE]),
    )
    assert updated == 1
    assert Job.objects.get(pk=waiting.pk).pending_reason == "BEHIND_SHARE_HEAD"
    assert Job.objects.get(pk=ended.pk).pending_reason != "BEHIND_SHARE_HEAD"


def test_objects_write_their_json_and_null_fields(people, fleet):
    job = submit(people.alice, fleet)
    job.recent_preemptions = [{"kind": "CROSS_SHARE", "note": 'quote " and \\ slash'}]
    job.scheduled_at = None
    job.preempted_count = 4
    assert update_objects([job], ["recent_preemptions", "scheduled_at", "preempted_count"]) == 1
    stored = Job.objects.get(pk=job.pk)
    assert stored.recent_preemptions == job.recent_preemptions
    assert stored.scheduled_at is None
    assert stored.preempted_count == 4


def test_nothing_to_write_costs_no_statement(people, fleet):
    with CaptureQueriesContext(connection) as queries:
        assert update_rows(Job, [], {"status_reason": []}) == 0
        assert update_objects([], ["status_reason"]) == 0
    assert len(queries) == 0


def unsaved_job(people, fleet, **fields) -> Job:
    """A new job of alice's in the vision share, not yet stored."""
    return Job(
        job_queue=fleet.queue,
        quota_share=fleet.vision,
        submitted_by=people.alice,
        capacity_unit=CapacityUnit.objects.get(name="a100"),
        **fields,
    )


def test_new_rows_are_stored_as_given_and_a_database_key_is_assigned(people, fleet):
    now = timezone.now()
    odd = 'tab\t, newline\n, quote " and \\ slash, ünïcode'
    jobs = [
        unsaved_job(
            people,
            fleet,
            share_name="vision",
            name=f"copied-{n}",
            command=odd,
            tags={"sweep": odd, "n": n},
            evaluate_on_exit=[{"action": "RETRY", "onExitCode": "1"}],
            simulated_duration_seconds=None if n else 2.5,
            created_at=now + timedelta(microseconds=n),
        )
        for n in range(3)
    ]
    insert_new(jobs)
    insert_new([Event(time=now, actor_name="alice", kind="submitted", job=j) for j in jobs])
    for job in jobs:
        stored = Job.objects.get(pk=job.pk)
        for field in ("name", "command", "tags", "evaluate_on_exit", "created_at", "status"):
            assert getattr(stored, field) == getattr(job, field), field
        assert stored.simulated_duration_seconds == job.simulated_duration_seconds
        assert stored.estimated_start_at is None
        assert Event.objects.filter(job=job, kind="submitted").count() == 1
    assert not jobs[0]._state.adding, "stored: a save() updates it"


def test_a_new_row_that_breaks_a_unique_rule_raises_integrity_error(people, fleet):
    twins = [unsaved_job(people, fleet, name="twin", client_token="same") for _ in range(2)]
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_new(twins)
    assert not Job.objects.filter(name="twin").exists()


def test_an_update_gives_back_the_rows_it_changed_and_only_those(people, fleet):
    waiting, ended = submit(people.alice, fleet, name="waiting"), submit(people.alice, fleet)
    Job.objects.filter(pk=ended.pk).update(status=JobStatus.SUCCEEDED)
    with CaptureQueriesContext(connection) as queries:
        changed = update_returning(
            Job.objects.filter(pk__in=[waiting.pk, ended.pk], status=JobStatus.RUNNABLE),
            ["id", "quota_share_id"],
            extra="1 + 1",
            status_reason="looked at",
            scheduling_priority=F("scheduling_priority") + 5,
        )
    assert len(queries) == 1
    assert changed == [(waiting.pk, waiting.quota_share_id, 2)]  # a UUID, as the ORM gives it
    assert Job.objects.get(pk=waiting.pk).scheduling_priority == waiting.scheduling_priority + 5
    assert Job.objects.get(pk=ended.pk).status_reason != "looked at"


def test_each_row_gets_its_own_value_or_all_the_same_one(people, fleet):
    jobs = [submit(people.alice, fleet, name=f"j{n}") for n in range(3)]
    start = timezone.now()
    times = {str(j.pk): start + timedelta(seconds=n) for n, j in enumerate(jobs)}
    Job.objects.filter(pk__in=list(times)).update(
        started_at=per_row(times, output_field=DateTimeField())
    )
    assert [Job.objects.get(pk=j.pk).started_at for j in jobs] == list(times.values())
    assert per_row(dict.fromkeys(times, start)) == start
