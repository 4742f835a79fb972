"""POST /api/v1/jobs/batch/: up to 1,000 jobs in one transaction, all or nothing."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from quotaportal.quotas import config_cache
from quotaportal.quotas.models import Event, Job


def client_of(people, user="alice") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens[user]}")
    return client


def item(fleet, name, **extra):
    return {
        "job_queue": fleet.queue.name,
        "quota_share": "vision",
        "capacity_unit": "a100",
        "name": name,
        **extra,
    }


def test_a_batch_creates_every_job_in_order_with_its_audit_event(people, fleet):
    items = [item(fleet, f"sweep-{i}", scheduling_priority=i) for i in range(5)]
    answer = client_of(people).post("/api/v1/jobs/batch/", {"jobs": items}, format="json")
    assert answer.status_code == 201, answer.content
    created = answer.json()["jobs"]
    assert [j["name"] for j in created] == [f"sweep-{i}" for i in range(5)]
    assert {j["status"] for j in created} == {"RUNNABLE"}
    jobs = Job.objects.filter(name__startswith="sweep-")
    assert sorted(j.scheduling_priority for j in jobs) == [0, 1, 2, 3, 4]
    assert {j.submitted_by for j in jobs} == {people.alice}
    submitted = Event.objects.filter(kind="submitted", job__in=jobs, actor=people.alice)
    assert submitted.count() == 5


def test_one_bad_item_submits_nothing_and_each_fault_is_named(people, fleet):
    items = [
        item(fleet, "fine"),
        item(fleet, "too-small", quantity=0),
        item(fleet, "nowhere", quota_share="ghost"),
        item(fleet, "big", quantity=50),
        item(fleet, "lost", job_queue="no-such-queue"),
    ]
    answer = client_of(people).post("/api/v1/jobs/batch/", {"jobs": items}, format="json")
    assert answer.status_code == 400
    errors = answer.json()
    assert "jobs[1].quantity" in errors
    assert "jobs[4].job_queue" in errors
    assert not Job.objects.exists()
    answer = client_of(people).post(
        "/api/v1/jobs/batch/", {"jobs": items[:1] + items[2:4]}, format="json"
    )
    errors = answer.json()
    assert set(errors) == {"jobs[1].quota_share", "jobs[2].quantity"}, errors
    assert "quota share ghost does not exist" in errors["jobs[1].quota_share"][0]
    assert not Job.objects.exists()


def test_a_batch_sent_again_with_client_tokens_makes_no_duplicates(people, fleet):
    items = [item(fleet, f"run-{i}", client_token=f"sweep-7-{i}") for i in range(3)]
    first = client_of(people).post("/api/v1/jobs/batch/", {"jobs": items}, format="json")
    again = client_of(people).post("/api/v1/jobs/batch/", {"jobs": items}, format="json")
    assert [j["id"] for j in first.json()["jobs"]] == [j["id"] for j in again.json()["jobs"]]
    assert Job.objects.count() == 3
    changed = [{**items[0], "scheduling_priority": 9}]
    conflict = client_of(people).post("/api/v1/jobs/batch/", {"jobs": changed}, format="json")
    assert conflict.status_code == 409
    assert "already used for a different request" in conflict.json()["detail"]


def test_a_batch_may_only_use_the_submitters_shares_and_has_bounds(people, fleet):
    forbidden = client_of(people, "bob").post(
        "/api/v1/jobs/batch/", {"jobs": [item(fleet, "x")]}, format="json"
    )
    assert forbidden.status_code == 400
    assert "not a member of team vision" in forbidden.json()["jobs[0].detail"][0]
    too_many = [item(fleet, f"j{i}") for i in range(1001)]
    answer = client_of(people).post("/api/v1/jobs/batch/", {"jobs": too_many}, format="json")
    assert answer.status_code == 400
    assert "jobs" in answer.json()
    empty = client_of(people).post("/api/v1/jobs/batch/", {"jobs": []}, format="json")
    assert empty.status_code == 400
    assert not Job.objects.exists()


def test_a_batch_costs_the_same_queries_for_10_jobs_as_for_100(people, fleet):
    def queries(count: int, prefix: str) -> int:
        items = [item(fleet, f"{prefix}-{i}") for i in range(count)]
        # A token's use is written once a minute: the call before has written it.
        assert client_of(people).get("/api/v1/job-queues/").status_code == 200
        config_cache.forget()  # each looks its share, unit and limits up (once)
        with CaptureQueriesContext(connection) as captured:
            answer = client_of(people).post("/api/v1/jobs/batch/", {"jobs": items}, format="json")
        assert answer.status_code == 201
        return len(captured.captured_queries)

    assert queries(10, "small") == queries(100, "large")
