"""Bad input through the REST API: a 4xx whose message names the field and the rule."""

from __future__ import annotations

import pytest

from quotaportal.quotas.models import QuotaShare
from quotaportal.tick.run import run_tick
from tests.builders import submit

JOB = {"job_queue": "gpu", "quota_share": "vision", "capacity_unit": "a100", "name": "train"}


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"scheduling_priority": 10000}, "scheduling_priority", "less than or equal to 9999"),
        ({"scheduling_priority": "high"}, "scheduling_priority", "valid integer"),
        ({"quantity": 0}, "quantity", "greater than or equal to 1"),
        ({"quantity": 9}, "quantity", "service environment has at most 4"),
        ({"job_queue": "nope"}, "job_queue", "does not exist"),
        ({"quota_share": "nlp-typo"}, "quota_share", "does not exist in job queue gpu"),
        ({"capacity_unit": "tpu"}, "capacity_unit", "capacity unit tpu does not exist"),
        ({"retry_attempts": 0}, "retry_attempts", "greater than or equal to 1"),
        ({"evaluate_on_exit": [{"action": "LATER"}]}, "evaluate_on_exit", "not a valid choice"),
        ({"name": ""}, "name", "may not be blank"),
    ],
)
def test_bad_job_submissions(as_user, fleet, change, field, message):
    response = as_user("alice").post("/api/v1/jobs/", {**JOB, **change}, format="json")
    assert response.status_code == 400
    assert message in str(response.json()[field])


def test_a_job_without_required_fields(as_user, fleet):
    response = as_user("alice").post("/api/v1/jobs/", {}, format="json")
    assert response.status_code == 400
    assert set(response.json()) >= {"job_queue", "quota_share", "capacity_unit", "name"}


def test_only_the_priority_of_a_job_can_be_patched(as_user, people, fleet):
    job = submit(people.alice, fleet)
    response = as_user("alice").patch(f"/api/v1/jobs/{job.pk}/", {"quantity": 3}, format="json")
    assert response.status_code == 400
    assert "only scheduling_priority can be changed" in response.json()["quantity"]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"capacity_limits": []}, "capacity_limits", "between 1 and 5"),
        (
            {"capacity_limits": [{"capacity_unit": "a100", "max_capacity": 1}] * 2},
            "capacity_limits",
            "each capacity unit may appear once",
        ),
        ({"borrow_limit": 50}, "borrow_limit", "only to the LEND_AND_BORROW strategy"),
        ({"borrow_limit": -2}, "borrow_limit", "greater than or equal to -1"),
        ({"sharing_strategy": "SHARE"}, "sharing_strategy", "not a valid choice"),
        ({"name": "vision"}, "name", "already exists in job queue gpu"),
        ({"name": "bad name!"}, "name", "letters, digits"),
        ({"team": "ghosts"}, "team", "does not exist"),
    ],
)
def test_bad_share_settings(as_user, fleet, change, field, message):
    body = {
        "name": "robots",
        "job_queue": "gpu",
        "team": "vision",
        "sharing_strategy": "LEND",
        "capacity_limits": [{"capacity_unit": "a100", "max_capacity": 1}],
        **change,
    }
    response = as_user("ada").post("/api/v1/quota-shares/", body, format="json")
    assert response.status_code == 400
    assert message in str(response.json()[field])
    assert QuotaShare.objects.count() == 2


def test_a_share_update_is_checked_the_same_way(as_user, fleet):
    response = as_user("ada").patch(
        f"/api/v1/quota-shares/{fleet.nlp.pk}/", {"borrow_limit": 10}, format="json"
    )
    assert response.status_code == 400
    assert "only to the LEND_AND_BORROW" in response.json()["borrow_limit"][0]


def test_job_responses_explain_where_the_job_stands(as_user, people, fleet):

    jobs = [submit(people.alice, fleet, name=f"v{i}", quantity=2) for i in range(3)]
    run_tick(fleet.queue.id)
    body = as_user("alice").get(f"/api/v1/jobs/{jobs[2].pk}/").json()
    assert body["status"] == "RUNNABLE"
    assert (body["pending_reason"], body["position_in_share"], body["preempted_count"]) == (
        "NOTHING_TO_BORROW",
        1,
        0,
    )
    started = as_user("alice").get(f"/api/v1/jobs/{jobs[0].pk}/").json()
    assert started["attempts"][0]["number"] == 1
    mine = as_user("bob").get("/api/v1/jobs/?mine=true").json()
    assert mine["count"] == 0
    queued = as_user("bob").get("/api/v1/jobs/?status=runnable&job_queue=gpu").json()
    assert [j["name"] for j in queued["results"]] == ["v2"]


def test_queue_snapshot_shows_the_front_and_share_utilization(as_user, people, fleet):

    for i in range(3):
        submit(people.alice, fleet, name=f"v{i}", quantity=2)
    run_tick(fleet.queue.id)
    snap = as_user("bob").get("/api/v1/job-queues/gpu/snapshot/").json()
    assert snap["capacity"] == {"a100": 4}
    assert [j["name"] for j in snap["front_of_queue"]] == ["v2"]
    assert snap["front_of_quota_shares"]["vision"]["pending_reason"] == "NOTHING_TO_BORROW"
    assert snap["share_utilization"]["vision"]["a100"] == {
        "used": 4,
        "limit": 2,
        "borrowed": 2,
        "lent": 0,
        "idle": 0,
        "short": 0,
    }
    assert snap["share_utilization"]["nlp"]["a100"] == {
        "used": 0,
        "limit": 2,
        "borrowed": 0,
        "lent": 2,
        "idle": 0,
        "short": 0,
    }
    assert snap["last_tick_at"] is not None


def test_pagination_bounds_huge_numbers(as_user, fleet):
    response = as_user("alice").get(
        "/api/v1/jobs/?limit=10000000000000000000000&offset=99999999999999999999"
    )
    assert response.status_code == 200
    assert response.json()["results"] == []
