"""Job arrays and dependencies through the REST API."""

from __future__ import annotations

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.models import Job, JobArray
from quotaportal.tick.run import run_tick

SWEEP = {
    "name": "sweep",
    "job_queue": "gpu",
    "quota_share": "vision",
    "capacity_unit": "a100",
    "command": "python train.py --lr-index $QP_ARRAY_INDEX",
}


def test_an_array_is_submitted_read_with_counts_and_listed_by_its_children(as_user, fleet):
    alice = as_user("alice")
    made = alice.post(
        "/api/v1/job-arrays/", {**SWEEP, "array_size": 5, "array_max_running": 2}, format="json"
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["size"], body["max_running"], body["quota_share"]) == (5, 2, "vision")
    assert (body["counts"]["RUNNABLE"], body["counts"]["PENDING"]) == (2, 3)
    children = alice.get(f"/api/v1/jobs/?array={body['id']}&sort=submitted").json()["results"]
    assert sorted(c["array"]["index"] for c in children) == [0, 1, 2, 3, 4]
    assert {c["array"]["name"] for c in children} == {"sweep"}
    child = next(c for c in children if c["array"]["index"] == 3)
    assert (child["name"], child["status"]) == ("sweep[3]", "PENDING")
    listed = alice.get("/api/v1/job-arrays/").json()["results"]
    assert [a["id"] for a in listed] == [body["id"]]


def test_array_priority_and_terminate_and_who_may(as_user, fleet):
    made = as_user("alice").post("/api/v1/job-arrays/", {**SWEEP, "array_size": 3}, format="json")
    url = f"/api/v1/job-arrays/{made.json()['id']}/"
    assert as_user("bob").patch(url, {"scheduling_priority": 9}, format="json").status_code == 403
    bumped = as_user("alice").patch(url, {"scheduling_priority": 9}, format="json")
    assert bumped.status_code == 200
    assert set(Job.objects.values_list("scheduling_priority", flat=True)) == {9}
    refused = as_user("alice").patch(url, {"name": "x"}, format="json")
    assert refused.status_code == 400
    assert "only scheduling_priority" in str(refused.json()["name"])
    assert as_user("bob").post(f"{url}terminate/", {}, format="json").status_code == 403
    ended = as_user("alice").post(f"{url}terminate/", {"reason": "bad sweep"}, format="json")
    assert ended.json()["counts"]["FAILED"] == 3
    assert as_user(None).get(url).status_code in (401, 403)


@pytest.mark.parametrize(
    ("shape", "field"),
    [
        ({}, "array_size"),
        ({"array_size": 0}, "array_size"),
        ({"array_size": 10_001}, "array_size"),
        ({"array_size": "many"}, "array_size"),
        ({"array_size": 2, "array_max_running": 0}, "array_max_running"),
        ({"array_size": 2, "quantity": 99}, "quantity"),
    ],
)
def test_bad_arrays_get_a_400_naming_the_field_and_make_nothing(as_user, fleet, shape, field):
    answer = as_user("alice").post("/api/v1/job-arrays/", {**SWEEP, **shape}, format="json")
    assert answer.status_code == 400
    assert field in answer.json()
    assert not JobArray.objects.exists()
    assert not Job.objects.exists()


def test_an_array_of_ten_thousand_in_one_request(as_user, fleet):
    made = as_user("alice").post(
        "/api/v1/job-arrays/",
        {**SWEEP, "array_size": 10_000, "array_max_running": 10},
        format="json",
    )
    assert made.status_code == 201
    assert made.json()["counts"]["PENDING"] == 9_990
    assert Job.objects.filter(name="sweep[9999]", array_index=9_999).exists()


def test_depends_on_by_rest_waits_then_runs(as_user, fleet):
    alice = as_user("alice")
    first = alice.post("/api/v1/jobs/", {**SWEEP, "name": "train-3"}, format="json").json()
    then = alice.post(
        "/api/v1/jobs/",
        {**SWEEP, "name": "eval", "depends_on": [{"job_id": first["id"]}]},
        format="json",
    )
    assert then.status_code == 201, then.json()
    assert then.json()["depends_on"] == [{"job_id": first["id"], "type": "afterok"}]
    run_tick(fleet.queue.id)
    shown = alice.get(f"/api/v1/jobs/{then.json()['id']}/").json()
    assert (shown["status"], shown["status_reason"]) == (
        "PENDING",
        "Waits for job train-3 to succeed",
    )
    assert shown["waiting_because"] == "Waits for job train-3 to succeed"
    services.finish_job(Job.objects.get(pk=first["id"]), "SUCCEEDED")
    run_tick(fleet.queue.id)
    assert alice.get(f"/api/v1/jobs/{then.json()['id']}/").json()["status"] != "PENDING"


@pytest.mark.parametrize(
    ("depends_on", "message"),
    [
        ([{"job_id": "nope"}], "valid UUID"),
        (
            [{"job_id": "3f1f0d2e-0000-4000-8000-000000000000", "type": "after"}],
            "not a valid choice",
        ),
        ([{"job_id": "3f1f0d2e-0000-4000-8000-000000000000"}], "no job"),
        ("x", "list"),
    ],
)
def test_bad_dependencies_get_a_400(as_user, fleet, depends_on, message):
    answer = as_user("alice").post(
        "/api/v1/jobs/", {**SWEEP, "depends_on": depends_on}, format="json"
    )
    assert answer.status_code == 400
    assert message in str(answer.json()["depends_on"])
    assert not Job.objects.exists()
