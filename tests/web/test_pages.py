"""Web pages: who sees what, forms with inline errors, HTMX fragments, CSRF, forged requests."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from quotaportal.quotas import services
from quotaportal.quotas.models import Job, QuotaShare
from quotaportal.tick.run import run_tick
from tests.builders import another_queue, submit

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def browser_as(people):
    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.mark.parametrize("url", ["/", "/jobs/", "/jobs/new/", "/shares/", "/hosts/", "/audit/"])
def test_pages_require_sign_in(client, fleet, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("url", ["/", "/jobs/", "/jobs/new/", "/hosts/", "/audit/"])
def test_scientists_see_the_shared_pages(browser_as, people, fleet, url):
    submit(people.alice, fleet)
    run_tick(fleet.queue.id)
    assert browser_as(people.alice).get(url).status_code == 200


def test_scientists_have_no_share_controls_and_a_forged_request_is_refused(
    browser_as, people, fleet
):
    alice = browser_as(people.alice)
    page = alice.get("/").content.decode()
    assert 'href="/shares/"' not in page
    assert alice.get("/shares/").status_code == 403
    forged = alice.post(
        "/shares/new/",
        {
            "job_queue": "gpu",
            "name": "mine",
            "team": "vision",
            "sharing_strategy": "LEND",
            "state": "ENABLED",
            "limit_unit_1": "a100",
            "limit_max_1": 4,
        },
    )
    assert forged.status_code == 403
    assert alice.post(f"/shares/{fleet.vision.pk}/delete/").status_code == 403
    assert not QuotaShare.objects.filter(name="mine").exists()


def test_the_live_dashboard_fragment_is_the_fragment_alone(browser_as, people, fleet):
    submit(people.alice, fleet, quantity=3)
    run_tick(fleet.queue.id)
    body = browser_as(people.bob).get("/?queue=gpu", **HTMX).content.decode()
    assert body.lstrip().startswith('<div id="live"')
    assert "<html" not in body
    assert "3 used of 2" in body  # vision borrows one of nlp's instances
    assert "1 lent out" in body


def test_the_dashboard_costs_the_same_queries_for_any_number_of_shares_and_jobs(
    browser_as, people, fleet, django_assert_num_queries
):
    from quotaportal.quotas.models import Team

    bob = browser_as(people.bob)
    submit(people.alice, fleet)
    run_tick(fleet.queue.id)
    with django_assert_num_queries(len_of_queries(bob)) as small:
        bob.get("/?queue=gpu", **HTMX)
    team = Team.objects.get(name="vision")
    for i in range(6):
        services.create_share(
            people.admin,
            job_queue=fleet.queue,
            name=f"extra{i}",
            team=team,
            capacity_limits={"a100": 1},
            sharing_strategy="LEND",
        )
    for i in range(30):
        submit(people.alice, fleet, name=f"more{i}")
    run_tick(fleet.queue.id)
    with django_assert_num_queries(len(small.captured_queries)):
        bob.get("/?queue=gpu", **HTMX)


def len_of_queries(client) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        client.get("/?queue=gpu", **HTMX)
    return len(captured.captured_queries)


def submit_form(fleet, **changes) -> dict:
    return {
        "quota_share": fleet.vision.pk,
        "name": "train",
        "capacity_unit": "a100",
        "quantity": 1,
        "scheduling_priority": 5,
        "retry_attempts": 1,
        **changes,
    }


def test_submitting_through_the_form(browser_as, people, fleet):
    alice = browser_as(people.alice)
    response = alice.post("/jobs/new/", submit_form(fleet, quantity=2))
    job = Job.objects.get(name="train")
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert (job.quantity, job.scheduling_priority, job.submitted_by) == (2, 5, people.alice)


def test_a_bad_submission_shows_the_message_next_to_the_field(browser_as, people, fleet):
    alice = browser_as(people.alice)
    response = alice.post("/jobs/new/", submit_form(fleet, quantity=9))
    assert response.status_code == 400
    assert "service environment has at most 4" in response.content.decode()
    assert not Job.objects.exists()
    # Another team's share is not even offered.
    assert f'value="{fleet.nlp.pk}"' not in alice.get("/jobs/new/").content.decode()


def test_raising_a_priority_inline_returns_the_updated_control(browser_as, people, fleet):
    job = submit(people.alice, fleet)
    response = browser_as(people.alice).post(
        f"/jobs/{job.pk}/priority/", {"scheduling_priority": 42}, **HTMX
    )
    assert response.status_code == 200
    assert 'value="42"' in response.content.decode()
    assert Job.objects.get(pk=job.pk).scheduling_priority == 42
    bad = browser_as(people.alice).post(
        f"/jobs/{job.pk}/priority/", {"scheduling_priority": 10001}, **HTMX
    )
    assert bad.status_code == 400
    assert "less than or equal to 9999" in bad.content.decode()


def test_another_teams_job_shows_no_controls_and_refuses_forged_changes(browser_as, people, fleet):
    job = submit(people.alice, fleet)
    bob = browser_as(people.bob)
    page = bob.get(f"/jobs/{job.pk}/").content.decode()
    assert "Terminate" not in page
    assert bob.post(f"/jobs/{job.pk}/priority/", {"scheduling_priority": 9}).status_code == 403
    assert bob.post(f"/jobs/{job.pk}/terminate/", {"reason": "x"}).status_code == 403
    assert Job.objects.get(pk=job.pk).status == "RUNNABLE"


def test_terminating_from_the_page(browser_as, people, fleet):
    job = submit(people.alice, fleet)
    response = browser_as(people.alice).post(
        f"/jobs/{job.pk}/terminate/", {"reason": "oops"}, **HTMX
    )
    assert response["HX-Refresh"] == "true"
    job.refresh_from_db()
    assert (job.status, job.status_reason) == ("FAILED", "oops")


def test_forms_refuse_requests_without_a_csrf_token(people, fleet):
    job = submit(people.alice, fleet)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(people.alice)
    assert strict.post(f"/jobs/{job.pk}/priority/", {"scheduling_priority": 3}).status_code == 403
    assert Job.objects.get(pk=job.pk).scheduling_priority == 0


def test_admin_creates_edits_disables_and_deletes_a_share(browser_as, people, fleet):
    admin = browser_as(people.admin)
    form = {
        "job_queue": "gpu",
        "name": "robots",
        "team": "vision",
        "sharing_strategy": "LEND",
        "state": "ENABLED",
        "limit_unit_1": "a100",
        "limit_max_1": 1,
    }
    assert admin.post("/shares/new/", form).status_code == 302
    share = QuotaShare.objects.get(name="robots")
    edit = {**form, "sharing_strategy": "LEND_AND_BORROW", "borrow_limit": 100, "limit_max_1": 2}
    assert admin.post(f"/shares/{share.pk}/edit/", edit).status_code == 302
    share.refresh_from_db()
    assert (share.sharing_strategy, share.borrow_limit) == ("LEND_AND_BORROW", 100)
    admin.post(f"/shares/{share.pk}/delete/")
    assert QuotaShare.objects.filter(pk=share.pk).exists(), "an ENABLED share is not deleted"
    admin.post(f"/shares/{share.pk}/toggle/")
    admin.post(f"/shares/{share.pk}/delete/")
    assert not QuotaShare.objects.filter(pk=share.pk).exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"limit_unit_1": "", "limit_max_1": ""}, "between 1 and 5 capacity limits"),
        ({"limit_max_1": ""}, "give both a unit and a max capacity"),
        ({"borrow_limit": 50}, "Borrow limit applies only to the LEND_AND_BORROW strategy"),
        ({"name": "vision"}, "already exists in job queue gpu"),
        ({"limit_max_1": 0}, "from 1 to 1,000,000"),
    ],
)
def test_share_form_errors_appear_inline(browser_as, people, fleet, change, message):
    form = {
        "job_queue": "gpu",
        "name": "robots",
        "team": "vision",
        "sharing_strategy": "LEND",
        "state": "ENABLED",
        "limit_unit_1": "a100",
        "limit_max_1": 1,
        **change,
    }
    response = browser_as(people.admin).post("/shares/new/", form)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert QuotaShare.objects.count() == 2


def test_bench_dashboard_reports_the_fragment_time(people, monkeypatch):
    import json
    from io import StringIO
    from types import SimpleNamespace

    from django.core.management import call_command
    from django.utils import timezone

    from quotaportal.web.views import dashboard

    # The dashboard's version changes each minute (its chart's time axis moves): the clock
    # stands still here, so a minute ending between the two requests changes nothing.
    frozen = timezone.now()
    monkeypatch.setattr(dashboard, "timezone", SimpleNamespace(now=lambda: frozen))
    out = StringIO()
    call_command(
        "bench_dashboard", "--shares", "5", "--jobs", "60", "--repeat", "1", "--json", stdout=out
    )
    figures = json.loads(out.getvalue())
    assert figures["status"] == 200
    assert figures["fragment_ms"] > 0
    assert figures["queries"] > 0
    assert (figures["unchanged_status"], figures["unchanged_bytes"]) == (204, 0)
    assert figures["unchanged_queries"] < figures["queries"]


def test_bench_dashboard_refuses_to_time_a_refused_request(people, settings):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.ALLOWED_HOSTS = ["elsewhere.example"]  # every request gets a 400
    with pytest.raises(CommandError, match="answered 400, not 200"):
        call_command("bench_dashboard", "--shares", "2", "--jobs", "10", "--repeat", "1")


def test_admins_create_agent_tokens_and_drain_hosts_from_the_hosts_page(browser_as, people):
    from quotaportal.hosts import services as host_services
    from quotaportal.hosts.models import GpuHost
    from quotaportal.quotas.models import ServiceEnvironment

    services.create_capacity_unit(people.admin, name="a100")
    env = services.create_service_environment(
        people.admin, name="local", backend="LOCAL", capacity_limits={"a100": 4}
    )
    first = host_services.token_for(host_services.create_agent_token(people.admin, env))
    host = host_services.register_host(first, name="gpu-box", capacity_unit="a100", gpus=[0, 1])
    admin, alice = browser_as(people.admin), browser_as(people.alice)
    assert "New agent token for local" in admin.get("/hosts/").content.decode()
    assert "New agent token" not in alice.get("/hosts/").content.decode()
    page = admin.post(f"/environments/{env.pk}/agent-token/", {"host_name": "gpu-2"})
    page = page.content.decode()
    token = re.search(r"echo &#x27;(\S+)&#x27; &gt;", page).group(1)
    assert "--token-file" in page
    assert token not in page.split("quotaportal-agent", 1)[1]
    made = host_services.token_for(token)
    assert (made.environment, made.host_name) == (
        ServiceEnvironment.objects.get(pk=env.pk),
        "gpu-2",
    )
    assert alice.post(f"/environments/{env.pk}/agent-token/").status_code == 403
    assert alice.post(f"/hosts/{host.pk}/state/", {"state": "DRAINING"}).status_code == 403
    admin.post(f"/hosts/{host.pk}/state/", {"state": "DRAINING"})
    assert GpuHost.objects.get(pk=host.pk).state == "DRAINING"


def test_the_jobs_page_filters_as_the_rest_api_does(browser_as, people, fleet):
    """One FilterSet for both (jobs.filters): the same names, any case, the same refusal."""
    mine = submit(people.alice, fleet, name="alices")
    submit(people.bob, fleet, share="nlp", name="bobs")
    page = browser_as(people.alice)
    found = page.get("/jobs/", {"job_queue": "gpu", "quota_share": "vision", "status": "runnable"})
    assert "alices" in found.content.decode()
    assert "bobs" not in found.content.decode()
    rest = page.get("/api/v1/jobs/", {"quota_share": "vision", "status": "runnable"}).json()
    assert [job["id"] for job in rest["results"]] == [str(mine.pk)]
    refused = page.get("/jobs/", {"status": "bogus"}).content.decode()
    assert "status must be one of" in refused
    assert "alices" not in refused, "a filter that cannot be applied lists nothing"
    only_mine = page.get("/jobs/", {"mine": "1"}).content.decode()
    assert "alices" in only_mine
    assert "bobs" not in only_mine


def test_403_and_404_are_pages_of_the_product_with_the_navigation(browser_as, people, fleet):
    scientist = browser_as(people.alice)
    refused = scientist.get("/manage/")
    assert refused.status_code == 403
    page = refused.content.decode()
    assert 'aria-label="Main"' in page
    assert "only admins can use the admin console" in page
    assert ">Jobs</a>" in page, "the signed-in navigation"
    missing = scientist.get("/no-such-page/" + "x" * 5000)
    assert missing.status_code == 404
    assert 'aria-label="Main"' in missing.content.decode()
    assert "x" * 100 not in missing.content.decode(), "a long address is not echoed in full"
    api = scientist.get("/api/v1/no-such-thing/")
    assert api.status_code == 404
    assert api.json() == {"detail": "not found"}
    fragment = scientist.get("/manage/", headers={"HX-Request": "true"})
    assert fragment.status_code == 403
    assert "<nav" not in fragment.content.decode(), "htmx gets the message for its target alone"


def test_an_anonymous_404_offers_to_sign_in(client):
    missing = client.get("/no-such-page/")
    assert missing.status_code == 404
    assert "Sign in" in missing.content.decode()


def test_the_submit_form_offers_what_the_users_shares_can_take(browser_as, people, fleet):
    from quotaportal.web.forms.jobs import JobSubmitForm

    form = JobSubmitForm(user=people.alice)  # alice's team has one share, on SIMULATED
    assert form.fields["quota_share"].initial == fleet.vision.pk, "the only share, chosen"
    assert form.fields["capacity_unit"].initial == "a100", "the only unit, chosen"
    assert "simulated_duration_seconds" in form.fields
    another_queue(
        people.admin,
        name="onprem",
        unit="gpu1",
        capacity=2,
        backend="LOCAL",
        share="bobs",
        team="nlp",
        strategy="LEND",
    )
    for share in fleet.queue.quota_shares.filter(team__name="nlp"):
        services.update_share(people.admin, share, state="DISABLED")
    form = JobSubmitForm(user=people.bob)  # now only a LOCAL share
    assert "simulated_duration_seconds" not in form.fields, "it would count for nothing"
    assert [u.name for u in form.fields["capacity_unit"].queryset] == ["gpu1"]
    page = browser_as(people.bob).get("/jobs/new/").content.decode()
    assert "Simulated duration" not in page


def test_the_jobs_lists_search_by_name_and_sort_alike(browser_as, people, fleet):
    low = submit(people.alice, fleet, name="sweep-low", scheduling_priority=1)
    high = submit(people.alice, fleet, name="sweep-high", scheduling_priority=9)
    submit(people.alice, fleet, name="other")
    page = browser_as(people.alice)
    rest = page.get("/api/v1/jobs/", {"name": "SWEEP", "sort": "-priority"}).json()
    assert [job["id"] for job in rest["results"]] == [str(high.pk), str(low.pk)]
    html = page.get("/jobs/", {"name": "sweep", "sort": "priority"}).content.decode()
    assert html.index("sweep-low") < html.index("sweep-high")
    assert ">other<" not in html
    refused = page.get("/api/v1/jobs/", {"sort": "password"})
    assert refused.status_code == 400
