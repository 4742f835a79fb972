"""A submit does what it must and no more: its queries are counted and pinned here."""

from __future__ import annotations

from rest_framework.test import APIClient

from quotaportal.quotas.models import Job, JobQueue

# The job and its audit event in a savepoint (4): that is all. The token with its user, the
# queue, share, unit, capacity, limits and the submitter's teams come from the lookups cached
# between requests (tests/api/test_cached_lookups.py and test_cached_tokens.py count them); the
# queue's row is not written (the new job raises its active-job count, which tells the tick);
# positions and attempts of a job just made are not asked for: it has neither.
SUBMIT_QUERIES = 4


def test_a_rest_submit_makes_a_fixed_number_of_queries(
    people, fleet, django_assert_num_queries, django_capture_on_commit_callbacks
):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens['alice']}")
    body = {
        "job_queue": fleet.queue.name,
        "quota_share": "vision",
        "capacity_unit": "a100",
        "name": "sweep",
    }
    client.post("/api/v1/jobs/", body, format="json")  # warm caches that live per process
    version = JobQueue.objects.get(pk=fleet.queue.pk).state_version
    with (
        django_assert_num_queries(SUBMIT_QUERIES),
        django_capture_on_commit_callbacks(execute=True),
    ):
        answer = client.post("/api/v1/jobs/", {**body, "name": "pinned"}, format="json")
    assert JobQueue.objects.get(pk=fleet.queue.pk).state_version == version
    assert answer.status_code == 201, answer.content
    created = answer.json()
    assert (created["status"], created["attempts"], created["position_in_queue"]) == (
        "RUNNABLE",
        [],
        None,
    )
    assert Job.objects.filter(name="pinned").exists()
