"""Submitting, re-prioritising and terminating jobs through the services."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from quotaportal.quotas import services
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import Event, Job
from quotaportal.tick.run import run_tick
from tests.builders import submit


def test_a_member_submits_to_their_team_share(people, fleet):
    job = submit(people.alice, fleet, quantity=2, scheduling_priority=7)
    assert (job.status, job.share_name, job.submitted_by) == ("RUNNABLE", "vision", people.alice)
    assert Event.objects.get(job=job).kind == "submitted"


def test_a_member_cannot_submit_to_another_team_share(people, fleet):
    with pytest.raises(Forbidden, match="not a member of team nlp"):
        submit(people.alice, fleet, share="nlp")


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"quantity": 9}, "quantity", "service environment has at most 4"),
        ({"quantity": 0}, "quantity", "between 1 and 100,000"),
        ({"scheduling_priority": 10000}, "scheduling_priority", "between 0 and 9999"),
        ({"capacity_unit": "tpu"}, "capacity_unit", "does not exist"),
        ({"retry_attempts": 11}, "retry_attempts", "between 1 and 10"),
        ({"attempt_duration_seconds": 0}, "attempt_duration_seconds", "between 1 and 10,000,000"),
        # The service checks the upper bounds too (the AWS endpoint and commands reach it
        # without a serializer): the same table as the serializer's and the database's.
        (
            {"preemption_retries_before_termination": 1_000_001},
            "preemption_retries_before_termination",
            "between 0 and 1,000,000",
        ),
        ({"simulated_duration_seconds": 1e9}, "simulated_duration_seconds", "10,000,000"),
        ({"evaluate_on_exit": [{"action": "MAYBE"}]}, "evaluate_on_exit", "RETRY or EXIT"),
        ({"name": ""}, "name", "1 to 128 letters, digits, - or _"),
        ({"name": "a/quota-share/bX"}, "name", "no spaces or other signs"),
        ({"name": "has space"}, "name", "no spaces or other signs"),
        ({"tags": {"aws:created": "x"}}, "tags", "AWS's own"),
    ],
)
def test_bad_submissions_name_the_field_and_rule(people, fleet, fields, field, message):
    with pytest.raises(InvalidInput) as err:
        submit(people.alice, fleet, **fields)
    assert message in err.value.errors[field]
    assert not Job.objects.exists()


def test_a_job_beyond_the_share_ceiling_is_rejected(people, fleet):
    services.update_share(people.admin, fleet.vision, borrow_limit=50)
    with pytest.raises(InvalidInput, match="quota share vision can use at most 3"):
        submit(people.alice, fleet, quantity=4)


def test_an_unknown_share_is_rejected(people, fleet):
    with pytest.raises(InvalidInput, match="quota share vison does not exist in job queue gpu"):
        submit(people.alice, fleet, share="vison")


def test_a_repeated_client_token_returns_the_first_job(people, fleet):
    first = submit(people.alice, fleet, client_token="abc")
    again = submit(people.alice, fleet, client_token="abc")
    assert again.pk == first.pk
    with pytest.raises(Conflict, match="already used for a different request"):
        submit(people.alice, fleet, client_token="abc", quantity=2)
    assert Job.objects.count() == 1


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_submits_with_one_client_token_make_one_job(people, fleet):
    results, errors = [], []

    def send():
        try:
            results.append(submit(people.alice, fleet, client_token="same").pk)
        except Exception as err:  # noqa: BLE001 - the assertion below reports it
            errors.append(err)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results)) == 1
    assert Job.objects.count() == 1


def test_priority_changes_are_recorded_and_final_jobs_refuse_them(people, fleet):
    job = submit(people.alice, fleet, scheduling_priority=1)
    services.set_priority(people.alice, job, 9)
    event = Event.objects.get(kind="priority_changed")
    assert event.detail == {"from": 1, "to": 9}
    with pytest.raises(InvalidInput, match="between 0 and 9999"):
        services.set_priority(people.alice, job, -1)
    services.terminate_job(people.alice, job, "changed my mind")
    with pytest.raises(Conflict, match="FAILED; its priority can no longer change"):
        services.set_priority(people.alice, job, 5)


def test_only_the_owning_team_or_an_admin_changes_a_job(people, fleet):
    job = submit(people.alice, fleet)
    with pytest.raises(Forbidden, match="another team"):
        services.set_priority(people.bob, job, 5)
    with pytest.raises(Forbidden):
        services.terminate_job(people.bob, job, "mine now")
    services.set_priority(people.admin, job, 5)


def test_terminating_ends_the_job_failed_with_the_reason(people, fleet):
    job = submit(people.alice, fleet)
    run_tick(fleet.queue.id)
    job = services.terminate_job(people.alice, job, "wrong data")
    assert (job.status, job.status_reason, job.is_terminated) == ("FAILED", "wrong data", True)
    assert job.attempts.get().status_reason == "wrong data"
    with pytest.raises(Conflict, match="already FAILED"):
        services.terminate_job(people.alice, job, "again")
