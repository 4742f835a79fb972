"""Every endpoint against every persona: admin (ada), member (alice, team vision),
another team's member (bob, team nlp), and anonymous."""

from __future__ import annotations

import pytest

from quotaportal.quotas.models import Job
from tests.builders import submit

PERSONAS = ["ada", "alice", "bob", None]
LISTS = [
    "teams",
    "capacity-units",
    "service-environments",
    "scheduling-policies",
    "job-queues",
    "quota-shares",
    "jobs",
    "hosts",
]


@pytest.mark.parametrize("resource", LISTS)
@pytest.mark.parametrize("who", PERSONAS)
def test_everyone_signed_in_may_read_and_anonymous_may_not(as_user, fleet, resource, who):
    response = as_user(who).get(f"/api/v1/{resource}/")
    assert response.status_code == (401 if who is None else 200)


CREATES = {
    "teams": {"name": "robotics"},
    "capacity-units": {"name": "h100", "gpus_per_unit": 8},
    "scheduling-policies": {"name": "fifo-2"},
    "service-environments": {
        "name": "sim-2",
        "capacity_limits": [{"capacity_unit": "a100", "max_capacity": 2}],
    },
    "job-queues": {"name": "gpu-2", "scheduling_policy": "fifo", "service_environment": "sim"},
    "quota-shares": {
        "name": "robots",
        "job_queue": "gpu",
        "team": "vision",
        "sharing_strategy": "LEND",
        "capacity_limits": [{"capacity_unit": "a100", "max_capacity": 1}],
    },
}


@pytest.mark.parametrize("resource", sorted(CREATES))
@pytest.mark.parametrize(
    ("who", "status"), [("ada", 201), ("alice", 403), ("bob", 403), (None, 401)]
)
def test_only_admins_create_resources(as_user, fleet, resource, who, status):
    response = as_user(who).post(f"/api/v1/{resource}/", CREATES[resource], format="json")
    assert response.status_code == status, response.content


@pytest.mark.parametrize(
    ("who", "status"), [("ada", 200), ("alice", 403), ("bob", 403), (None, 401)]
)
def test_only_admins_change_shares(as_user, fleet, who, status):
    response = as_user(who).patch(
        f"/api/v1/quota-shares/{fleet.vision.pk}/", {"state": "DISABLED"}, format="json"
    )
    assert response.status_code == status


def test_deleting_an_enabled_share_conflicts_and_a_disabled_one_goes(as_user, fleet):
    admin = as_user("ada")
    response = admin.delete(f"/api/v1/quota-shares/{fleet.nlp.pk}/")
    assert response.status_code == 409
    assert "must be DISABLED" in response.json()["detail"]
    admin.patch(f"/api/v1/quota-shares/{fleet.nlp.pk}/", {"state": "DISABLED"}, format="json")
    assert admin.delete(f"/api/v1/quota-shares/{fleet.nlp.pk}/").status_code == 204


JOB = {"job_queue": "gpu", "quota_share": "vision", "capacity_unit": "a100", "name": "train"}


@pytest.mark.parametrize(
    ("who", "status"), [("ada", 201), ("alice", 201), ("bob", 403), (None, 401)]
)
def test_members_submit_to_their_own_team_share(as_user, fleet, who, status):
    response = as_user(who).post("/api/v1/jobs/", JOB, format="json")
    assert response.status_code == status, response.content
    assert Job.objects.count() == (1 if status == 201 else 0)


@pytest.mark.parametrize(
    ("who", "status"), [("ada", 200), ("alice", 200), ("bob", 403), (None, 401)]
)
def test_only_the_owning_team_or_an_admin_raises_a_priority(as_user, people, fleet, who, status):
    job = submit(people.alice, fleet)
    response = as_user(who).patch(
        f"/api/v1/jobs/{job.pk}/", {"scheduling_priority": 50}, format="json"
    )
    assert response.status_code == status
    assert Job.objects.get(pk=job.pk).scheduling_priority == (50 if status == 200 else 0)


@pytest.mark.parametrize(
    ("who", "status"), [("ada", 200), ("alice", 200), ("bob", 403), (None, 401)]
)
def test_only_the_owning_team_or_an_admin_terminates(as_user, people, fleet, who, status):
    job = submit(people.alice, fleet)
    response = as_user(who).post(
        f"/api/v1/jobs/{job.pk}/terminate/", {"reason": "stop"}, format="json"
    )
    assert response.status_code == status
    if status == 200:
        assert response.json()["status"] == "FAILED"
        again = as_user(who).post(f"/api/v1/jobs/{job.pk}/terminate/", {}, format="json")
        assert again.status_code == 409


def test_another_teams_job_can_be_read(as_user, people, fleet):
    job = submit(people.alice, fleet)
    response = as_user("bob").get(f"/api/v1/jobs/{job.pk}/")
    assert response.status_code == 200
    assert response.json()["quota_share"] == "vision"


def test_unknown_objects_are_404(as_user, fleet):
    client = as_user("ada")
    assert client.get("/api/v1/jobs/00000000-0000-0000-0000-000000000000/").status_code == 404
    assert client.get("/api/v1/job-queues/nope/").status_code == 404
    assert client.get("/api/v1/quota-shares/999999/").status_code == 404
