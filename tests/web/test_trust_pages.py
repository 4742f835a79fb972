"""The web side of trust: sign-in throttling, job output only for its team, and the admin's
agent-token and host controls (revoke, release, delete), each with CSRF and role checks."""

from __future__ import annotations

import pytest
from django.test import Client

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import AgentToken, GpuHost, Placement
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue, submit

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_sign_in_is_throttled_after_repeated_wrong_passwords(people, settings):
    people.alice.set_password("right-password")
    people.alice.save()
    client = Client()
    wrong = {"username": "alice", "password": "wrong"}
    answers = [
        client.post("/login/", wrong).status_code for _ in range(settings.AXES_FAILURE_LIMIT)
    ]
    assert answers[:-1] == [200] * (settings.AXES_FAILURE_LIMIT - 1), "the form says try again"
    locked = client.post("/login/", {"username": "alice", "password": "right-password"})
    assert locked.status_code == 429
    assert "Too many sign-in attempts" in locked.content.decode()
    other = Client(REMOTE_ADDR="10.9.9.9")  # another address: not locked out by this one
    assert (
        other.post("/login/", {"username": "alice", "password": "right-password"}).status_code
        == 302
    )


def test_job_output_is_shown_only_to_its_team_and_admins(people, api_client_for):
    env, queue = build_queue(people.admin, capacity=2, backend="LOCAL")
    add_share(people.admin, queue, "vision", "vision", 2, "LEND")
    token = host_services.token_for(host_services.create_agent_token(None, env, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="a100", gpus=[0, 1])
    job = submit(people.alice, type("F", (), {"queue": queue}), name="secretive")
    run_tick(queue.id)
    placement = Placement.objects.get(attempt__job=job)
    host_services.report(
        token, "gpu-1", placement=placement.pk, event="output", output_tail="api-key=hunter2"
    )
    assert "hunter2" in signed_in(people.alice).get(f"/jobs/{job.pk}/").content.decode()
    assert "hunter2" in signed_in(people.admin).get(f"/jobs/{job.pk}/").content.decode()
    page = signed_in(people.bob).get(f"/jobs/{job.pk}/").content.decode()
    assert "hunter2" not in page
    assert "shown to its team and to admins" in page
    for user, shown in ((people.alice, True), (people.bob, False)):
        data = api_client_for(user).get(f"/api/v1/jobs/{job.pk}/").json()
        tail = data["attempts"][0]["placements"][0]["output_tail"]
        assert (tail == "api-key=hunter2") is shown
        listed = api_client_for(user).get("/api/v1/jobs/").json()["results"][0]
        assert ("hunter2" in str(listed)) is shown


@pytest.fixture
def api_client_for():
    from rest_framework.test import APIClient

    def make(user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    return make


def test_admins_revoke_tokens_and_release_and_delete_hosts_from_the_hosts_page(people):
    services.create_capacity_unit(people.admin, name="a100")
    env = services.create_service_environment(
        people.admin, name="local", backend="LOCAL", capacity_limits={"a100": 4}
    )
    token = host_services.token_for(host_services.create_agent_token(None, env, "gpu-1"))
    host = host_services.register_host(token, name="gpu-1", capacity_unit="a100", gpus=[0, 1])
    admin, alice = signed_in(people.admin), signed_in(people.alice)
    page = admin.get("/hosts/").content.decode()
    assert token.prefix in page
    assert "Revoke" in page
    assert token.prefix not in alice.get("/hosts/").content.decode()
    assert alice.post(f"/agent-tokens/{token.pk}/revoke/").status_code == 403
    assert alice.post(f"/hosts/{host.pk}/release/").status_code == 403
    assert alice.post(f"/hosts/{host.pk}/delete/").status_code == 403
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(people.admin)
    assert forged.post(f"/agent-tokens/{token.pk}/revoke/").status_code == 403
    assert AgentToken.objects.get(pk=token.pk).revoked is False
    admin.post(f"/agent-tokens/{token.pk}/revoke/")
    assert AgentToken.objects.get(pk=token.pk).revoked is True
    assert GpuHost.objects.get(pk=host.pk).state == "LOST"
    admin.post(f"/hosts/{host.pk}/delete/")
    assert not GpuHost.objects.filter(pk=host.pk).exists()


def test_deleting_a_ready_host_from_the_page_explains_why_not(people):
    services.create_capacity_unit(people.admin, name="a100")
    env = services.create_service_environment(
        people.admin, name="local", backend="LOCAL", capacity_limits={"a100": 4}
    )
    token = host_services.token_for(host_services.create_agent_token(None, env, "gpu-1"))
    host = host_services.register_host(token, name="gpu-1", capacity_unit="a100", gpus=[0])
    page = signed_in(people.admin).post(f"/hosts/{host.pk}/delete/", follow=True)
    assert "only a LOST host can be deleted" in page.content.decode()
    assert GpuHost.objects.filter(pk=host.pk).exists()
    assert Job.objects.count() == 0


def test_share_limits_beyond_capacity_are_flagged_and_show_no_phantom_idle(people, fleet):
    """fleet: 4 × a100; vision and nlp have 2 each. A third share of 2 overcommits it."""
    from quotaportal.quotas import selectors

    add_share(people.admin, fleet.queue, "extra", "vision", 2, "LEND")
    page = signed_in(people.admin).get("/shares/").content.decode()
    assert "limits on a100 total 6 on 4 instances" in page
    dashboard = signed_in(people.alice).get("/").content.decode()
    assert "limits on a100 total 6 on 4 instances" in dashboard
    figures = selectors.share_utilization(fleet.queue)
    idle = sum(f["a100"]["idle"] + f["a100"]["lent"] for f in figures.values())
    assert idle == 4, "no more idle than the environment has"
    assert sum(f["a100"]["short"] for f in figures.values()) == 2


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("favicon.svg")


@pytest.mark.parametrize("value", ["", "12000"])
def test_a_bad_priority_without_htmx_shows_the_whole_page_with_the_error(people, fleet, value):
    job = submit(people.alice, fleet, name="waiting")
    response = signed_in(people.alice).post(
        f"/jobs/{job.pk}/priority/", {"scheduling_priority": value}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert 'aria-label="Main"' in page, "a full page, with its navigation"
    assert "<h1>waiting</h1>" in page
    assert 'role="alert"' in page
    assert f'value="{value}"' in page, "the value typed stays in the box"


def test_a_good_priority_without_htmx_confirms_and_returns_to_the_job(people, fleet):
    job = submit(people.alice, fleet, name="waiting")
    client = signed_in(people.alice)
    response = client.post(f"/jobs/{job.pk}/priority/", {"scheduling_priority": 7}, follow=True)
    assert "waiting: Priority set to 7." in response.content.decode()
    assert Job.objects.get(pk=job.pk).scheduling_priority == 7


def test_the_audit_log_reads_as_sentences_naming_both_sides_of_a_preemption(people, fleet):
    """vision borrows nlp's idle instances; nlp's job takes one back (cross-share)."""
    borrowers = [submit(people.alice, fleet, name=f"a{i}") for i in range(4)]
    run_tick(fleet.queue.id)
    taker = submit(people.bob, fleet, share="nlp", name="b1-train")
    run_tick(fleet.queue.id)
    page = signed_in(people.admin).get("/audit/").content.decode()
    assert "Preempted (cross-share)" in page
    assert "take back nlp&#x27;s lent capacity" in page or "take back nlp's lent capacity" in page
    assert "after taking back lent capacity from" in page
    assert "{&#x27;" not in page, "no raw dicts"
    victim = next(j for j in borrowers if Job.objects.get(pk=j.pk).preempted_count)
    job_page = signed_in(people.alice).get(f"/jobs/{victim.pk}/").content.decode()
    assert f'href="/jobs/{taker.pk}/">b1-train</a> (nlp)' in job_page
