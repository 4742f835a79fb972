"""AWS_BATCH environments through every interface: the REST API and the console refuse bad
connection settings with a message naming the field, the pages show the sync's health and a
job not pushed yet, only admins answer drift, /metrics carries the sync lag, and the two
commands (aws_sync_check changes nothing; aws_import names what went wrong)."""

from __future__ import annotations

import io
import socket
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from quotaportal.awsbatch.models import MirroredResource, MirrorKind, RemoteJob, SyncState
from quotaportal.awsbatch.sync import client as aws_client
from quotaportal.awsbatch.sync.comparable import AWS_ACTIVE, share_config
from quotaportal.awsbatch.sync.mirror import share_key
from quotaportal.quotas import services
from quotaportal.quotas.models import Event, Job, ServiceEnvironment
from tests.awsbatch.sync_builders import UNIT, Aws, submit
from tests.builders import TOKEN, add_share, samples, value


@pytest.fixture(autouse=True)
def _fresh_clients():
    aws_client.forget_clients()
    yield
    aws_client.forget_clients()


@pytest.fixture
def aws(people):
    return Aws(people.admin)


def api(people, user="ada") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens[user]}")
    return client


ENV = {
    "name": "sagemaker",
    "backend": "AWS_BATCH",
    "region": "us-west-2",
    "capacity_limits": [{"capacity_unit": UNIT, "max_capacity": 4}],
}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"region": ""}, "region", "needs its AWS region"),
        ({"region": "Mars Base 1"}, "region", "needs its AWS region"),
        ({"endpoint_url": "ftp://x"}, "endpoint_url", "http:// or https://"),
        ({"endpoint_url": "http://a b"}, "endpoint_url", "http:// or https://"),
        ({"aws_profile": "a profile; rm -rf"}, "aws_profile", "profile name"),
        ({"backend": "SIMULATED", "endpoint_url": "http://x"}, "endpoint_url", "only AWS_BATCH"),
    ],
)
def test_rest_refuses_bad_connection_settings_naming_the_field(people, change, field, words):
    services.create_capacity_unit(people.admin, name=UNIT)
    response = api(people).post("/api/v1/service-environments/", {**ENV, **change}, format="json")
    assert response.status_code == 400
    assert words in str(response.json()[field])
    assert not ServiceEnvironment.objects.exists()


def test_rest_creates_an_aws_environment_and_shows_its_sync_health(people):
    services.create_capacity_unit(people.admin, name=UNIT)
    body = {**ENV, "endpoint_url": "https://batch.example.test", "aws_profile": "prod"}
    created = api(people).post("/api/v1/service-environments/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["aws_sync"] is None
    env = ServiceEnvironment.objects.get(name="sagemaker")
    assert (env.region, env.endpoint_url, env.aws_profile) == (
        "us-west-2",
        "https://batch.example.test",
        "prod",
    )
    next_try = timezone.now() + timedelta(seconds=30)
    SyncState.objects.create(
        environment=env, failures=2, last_error="boom", last_calls=7, backoff_until=next_try
    )
    shown = api(people, "alice").get("/api/v1/service-environments/sagemaker/").json()
    assert shown["aws_sync"]["failures_in_a_row"] == 2
    assert shown["aws_sync"]["last_error"] == "boom"
    assert parse_datetime(shown["aws_sync"]["next_try_at"]) == next_try.replace(
        microsecond=next_try.microsecond
    )
    patched = api(people).patch(
        "/api/v1/service-environments/sagemaker/", {"region": "eu-west-1"}, format="json"
    )
    assert patched.status_code == 200
    assert patched.json()["region"] == "eu-west-1"
    refused = api(people, "alice").patch(
        "/api/v1/service-environments/sagemaker/", {"region": "eu-west-2"}, format="json"
    )
    assert refused.status_code == 403


def test_the_console_form_shows_a_bad_region_in_place_and_saves_a_good_one(client, people):
    services.create_capacity_unit(people.admin, name=UNIT)
    client.force_login(people.admin)
    form = {
        "name": "sagemaker",
        "backend": "AWS_BATCH",
        "capacity_limits": f"{UNIT}=4",
        "state": "ENABLED",
        "region": "nowhere",
    }
    bad = client.post("/manage/environments/", form)
    assert bad.status_code == 400
    assert b"needs its AWS region" in bad.content
    assert not ServiceEnvironment.objects.exists()
    good = client.post("/manage/environments/", {**form, "region": "us-west-2"})
    assert good.status_code == 302
    env = ServiceEnvironment.objects.get(name="sagemaker")
    page = client.get(f"/manage/environments/{env.pk}/")
    assert b"Import a job queue from AWS" in page.content
    assert b"AWS Batch: not reached yet" in page.content


def test_pages_show_a_job_not_pushed_yet_and_a_failing_sync(client, aws, people):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    SyncState.objects.create(
        environment=aws.env,
        failures=3,
        last_error="submit_service_job: Could not connect to the endpoint URL",
        backoff_until=timezone.now() + timedelta(seconds=20),
    )
    client.force_login(people.alice)
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "not pushed yet: it is sent when AWS Batch can be reached" in detail
    dashboard = client.get("/").content.decode()
    assert "AWS Batch schedules this queue" in dashboard
    assert "3 times in a row" in dashboard
    assert "Could not connect" in dashboard
    # The fleet page says it too, on the environment's card.
    fleet = client.get("/fleet/").content.decode()
    card = fleet[fleet.index('data-environment="aws"') :].split("</section>")[0]
    assert "AWS Batch: " in card
    assert "failing" in card
    assert "3 times in a row" in card
    assert "Could not connect" in card


def test_only_admins_answer_drift_and_a_bad_answer_changes_nothing(client, aws, people):
    share = aws.share("qs1", "vision")
    row = MirroredResource.objects.get(kind=MirrorKind.SHARE)
    row.aws = {**share_config(share), "capacity_limits": {UNIT: 3}}
    row.drift_at = timezone.now()
    row.save()
    client.force_login(people.alice)
    assert client.post(f"/shares/{share.pk}/drift/", {"decision": "adopt"}).status_code == 403
    client.force_login(people.admin)
    page = client.get(f"/shares/{share.pk}/edit/").content.decode()
    assert "Changed in AWS" in page
    assert "Keep the portal's value" in page
    refused = client.post(f"/shares/{share.pk}/drift/", {"decision": "both"}, follow=True)
    assert "choose keep" in refused.content.decode()
    row.refresh_from_db()
    assert row.aws is not None
    client.post(f"/shares/{share.pk}/drift/", {"decision": "keep"})
    row.refresh_from_db()
    assert row.aws is None
    assert row.synced["capacity_limits"] == {UNIT: 3}  # AWS's value is the base: push ours


def test_metrics_carry_the_sync_lag_and_failures(client, settings, aws):
    settings.QP_METRICS_TOKEN = TOKEN
    SyncState.objects.create(
        environment=aws.env, last_success_at=timezone.now() - timedelta(seconds=90), failures=1
    )
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    found = samples(text)
    lag = value(found, "quotaportal_aws_sync_lag_seconds", service_environment="aws")
    assert 90 <= lag < 120
    assert value(found, "quotaportal_aws_sync_failures", service_environment="aws") == 1


def test_aws_sync_check_prints_what_would_happen_and_changes_nothing(aws, people):
    aws.share("qs1", "vision")
    qs2 = aws.share("qs2", "vision", strategy="LEND")
    services.update_share(people.admin, qs2, capacity_limits={UNIT: 2})
    job = submit(people.alice, aws, name="waiting")
    from tests.awsbatch.sync_builders import ARN, share_detail

    aws.stub.add_response("list_scheduling_policies", {"schedulingPolicies": []}, None)
    MirroredResource.objects.filter(kind=MirrorKind.POLICY).update(arn="")
    aws.expect_config(
        [
            share_detail(
                f"{ARN}:job-queue/gpu/quota-share/qs1", limit=1, strategy="LEND_AND_BORROW"
            ),
            share_detail(
                f"{ARN}:job-queue/gpu/quota-share/qs2", limit=1, strategy="LEND", name="qs2"
            ),
        ]
    )
    for _ in AWS_ACTIVE:
        aws.stub.add_response("list_service_jobs", {"jobSummaryList": []}, None)
    events_before = Event.objects.count()
    out = io.StringIO()
    call_command("aws_sync_check", "aws", stdout=out)
    aws.stub.assert_no_pending_responses()
    text = out.getvalue()
    assert "would push: created scheduling policy gpu-fifo" in text
    assert "would push: updated quota share qs2: capacity_limits" in text
    assert f"would push: submit job waiting ({job.pk})" in text
    assert "nothing to pull" in text
    assert "3 not sent" in text
    # Nothing changed: no row, no event, no health record, the policy still unknown.
    assert not RemoteJob.objects.exists()
    assert Event.objects.count() == events_before
    assert not SyncState.objects.filter(environment=aws.env, last_attempt_at__isnull=False).exists()
    assert MirroredResource.objects.get(kind=MirrorKind.POLICY).arn == ""
    assert MirroredResource.objects.get(name=share_key("gpu", "qs2")).synced["capacity_limits"] == {
        UNIT: 1
    }
    job.refresh_from_db()
    assert job.status == "RUNNABLE"


def test_aws_sync_check_refuses_other_backends_and_unknown_names(people, fleet):
    with pytest.raises(CommandError, match="SIMULATED environment, not AWS_BATCH"):
        call_command("aws_sync_check", "sim")
    with pytest.raises(CommandError, match="no service environment named 'nope'"):
        call_command("aws_sync_check", "nope")


def test_aws_import_says_what_went_wrong_and_imports_nothing(db, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CommandError, match="Could not connect.*nothing was imported"):
        call_command(
            "aws_import", "--region", "us-west-2", "--endpoint-url", f"http://127.0.0.1:{port}", "q"
        )
    with pytest.raises(CommandError, match="needs its AWS region"):
        call_command("aws_import", "--region", "moon", "q")
    assert not ServiceEnvironment.objects.exists()
    assert not Job.objects.exists()


def test_reservations_are_refused_on_an_aws_environment(people, aws):
    now = timezone.now()
    response = api(people).post(
        "/api/v1/service-environments/aws/reservations/",
        {
            "name": "plan",
            "capacity_unit": UNIT,
            "instances": 2,
            "starts_at": now.isoformat(),
            "ends_at": (now + timedelta(hours=1)).isoformat(),
        },
        format="json",
    )
    assert response.status_code == 409
    assert "AWS's to manage" in response.json()["detail"]


def test_rest_shows_drift_and_lets_only_admins_answer_it(people, aws):
    share = aws.share("qs1", "vision")
    url = f"/api/v1/quota-shares/{share.pk}/aws-drift/"
    assert api(people).get(url).status_code == 404
    row = MirroredResource.objects.get(kind=MirrorKind.SHARE)
    row.aws, row.drift_at = {**share_config(share), "capacity_limits": {UNIT: 3}}, timezone.now()
    row.save()
    shown = api(people, "alice").get(url).json()
    assert shown["differs"] == [{"field": "capacity_limits", "portal": {UNIT: 1}, "aws": {UNIT: 3}}]
    assert api(people, "alice").post(url, {"decision": "adopt"}, format="json").status_code == 403
    bad = api(people).post(url, {"decision": "both"}, format="json")
    assert bad.status_code == 400
    assert "decision" in bad.json()
    assert api(people).post(url, {"decision": "adopt"}, format="json").status_code == 204
    assert api(people).post(url, {"decision": "adopt"}, format="json").status_code == 409
    share.refresh_from_db()
    assert share_config(share)["capacity_limits"] == {UNIT: 3}


def test_aws_sync_check_lists_what_a_queue_new_to_aws_would_create(people):
    """Nothing of it is in AWS yet: the check says what a sync would create, reads nothing
    back from a queue AWS does not have, and exits cleanly (issue 34, item 4)."""
    aws = Aws(people.admin, name="newq", env_name="fresh")
    add_share(people.admin, aws.queue, "qs1", "vision", 1, "LEND", unit=UNIT)
    aws.stub.add_response("list_scheduling_policies", {"schedulingPolicies": []}, None)
    aws.stub.add_response("describe_service_environments", {"serviceEnvironments": []}, None)
    aws.stub.add_response("describe_job_queues", {"jobQueues": []}, None)
    out = io.StringIO()
    call_command("aws_sync_check", "fresh", stdout=out)
    aws.stub.assert_no_pending_responses()
    text = out.getvalue()
    assert "would push: created job queue newq" in text
    assert "would push: created quota share qs1" in text
    assert "not in AWS Batch yet" in text
    assert "error" not in text
    assert not MirroredResource.objects.filter(environment=aws.env).exclude(arn="").exists()
