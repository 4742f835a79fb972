"""What a hostile or careless client sends gets a 4xx that says what to fix, never a 500:
odd JSON bodies, text PostgreSQL cannot store, integers past 2**31, huge commands and tags,
a submit whose job starts before the answer is built, and a broker that is down."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from django.db import connection
from django.test import override_settings

from quotaportal.quotas import selectors
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from scheduler.positions import QueueNumbering
from tests.builders import submit

JOB = {"job_queue": "gpu", "quota_share": "vision", "capacity_unit": "a100", "name": "train"}
BIG = 2**31


@pytest.mark.parametrize("body", ["null", "1", '"text"', "[1, 2]", "true"])
def test_a_body_that_is_not_a_json_object_is_a_400(as_user, people, fleet, body):
    job = submit(people.alice, fleet)
    response = as_user("alice").generic(
        "PATCH", f"/api/v1/jobs/{job.pk}/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "must be a JSON object" in response.json()["detail"]


def test_a_lone_surrogate_is_refused_with_a_400_not_stored(as_user, fleet):
    body = json.dumps({**JOB, "service_request_payload": {"note": "\ud800"}})
    response = as_user("alice").generic(
        "POST", "/api/v1/jobs/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["detail"]
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"capacity_limits": [{"capacity_unit": "a100", "max_capacity": BIG}]}, "capacity_limits"),
        ({"borrow_limit": BIG}, "borrow_limit"),
    ],
)
def test_integers_past_2_to_the_31_are_refused_for_shares(as_user, fleet, change, field):
    share = {
        "job_queue": "gpu",
        "name": "huge",
        "team": "vision",
        "capacity_limits": [{"capacity_unit": "a100", "max_capacity": 1}],
        "sharing_strategy": "LEND_AND_BORROW",
        **change,
    }
    response = as_user("ada").post("/api/v1/quota-shares/", share, format="json")
    assert response.status_code == 400
    assert field in response.json()
    patched = as_user("ada").patch(
        f"/api/v1/quota-shares/{fleet.vision.pk}/", change, format="json"
    )
    assert patched.status_code == 400


def test_environment_capacity_past_2_to_the_31_is_refused(as_user, fleet):
    limits = {"capacity_limits": [{"capacity_unit": "a100", "max_capacity": BIG}]}
    response = as_user("ada").patch("/api/v1/service-environments/sim/", limits, format="json")
    assert response.status_code == 400


def test_the_share_form_refuses_2_to_the_31_in_place(people, fleet, client):
    client.force_login(people.admin)
    form = {
        "job_queue": "gpu",
        "name": "huge",
        "team": "vision",
        "sharing_strategy": "LEND_AND_BORROW",
        "borrow_limit": BIG,
        "state": "ENABLED",
        "limit_unit_1": "a100",
        "limit_max_1": BIG,
    }
    response = client.post("/shares/new/", form)
    assert response.status_code == 400
    assert "less than or equal to 1000000" in response.content.decode()
    response = client.post("/shares/new/", {**form, "borrow_limit": 50})
    assert response.status_code == 400
    assert "from 1 to 1,000,000" in response.content.decode()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"command": "x" * (64 * 1024 + 1)}, "command", "no more than 65536"),
        ({"tags": {f"k{i}": "v" for i in range(51)}}, "tags", "at most 50 tags"),
        ({"tags": {"k" * 129: "v"}}, "tags", "1 to 128 characters"),
        ({"tags": {"k": "v" * 257}}, "tags", "no more than 256"),
    ],
)
def test_commands_and_tags_are_bounded(as_user, fleet, change, field, message):
    response = as_user("alice").post("/api/v1/jobs/", {**JOB, **change}, format="json")
    assert response.status_code == 400
    assert message in str(response.json()[field])


def test_the_service_bounds_a_command_in_bytes_whatever_the_interface(people, fleet):
    from quotaportal.quotas.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        submit(people.alice, fleet, command="é" * 40_000)  # 80,000 bytes in 40,000 characters
    assert "the limit is 65,536" in err.value.errors["command"]


def test_client_tokens_are_per_submitter(as_user, fleet):
    alice = as_user("alice").post("/api/v1/jobs/", {**JOB, "client_token": "t-1"}, format="json")
    nlp_job = {**JOB, "quota_share": "nlp", "client_token": "t-1"}
    bob = as_user("bob").post("/api/v1/jobs/", nlp_job, format="json")
    assert (alice.status_code, bob.status_code) == (201, 201), "no collision, nothing revealed"
    again = as_user("alice").post("/api/v1/jobs/", {**JOB, "client_token": "t-1"}, format="json")
    assert again.json()["id"] == alice.json()["id"]


@pytest.mark.django_db(transaction=True)
def test_a_submit_whose_job_starts_at_once_answers_201(as_user, fleet, settings):
    """Inline ticks (no broker, as in `make demo`): the job is dispatched before the answer."""
    from quotaportal.celery import app

    settings.QP_IMMEDIATE_TICKS = True
    app.conf.task_always_eager = True
    try:
        response = as_user("alice").post("/api/v1/jobs/", JOB, format="json")
        listed = as_user("alice").get("/api/v1/jobs/")
    finally:
        app.conf.task_always_eager = False
    assert response.status_code == 201, response.content
    assert Job.objects.get(pk=response.json()["id"]).status == "SCHEDULED"
    assert response.json()["position_in_queue"] is None
    assert listed.status_code == 200


def test_positions_of_jobs_that_moved_on_are_none_not_an_error(people, fleet):

    jobs = [submit(people.alice, fleet, name=f"j{i}") for i in range(3)]
    run_tick(fleet.queue.id)  # all three start: the objects in hand still say RUNNABLE
    assert selectors.job_positions(jobs) == {}
    numbering = QueueNumbering([2, 1])
    assert numbering.position(0, 3) is None
    assert numbering.position(5, 1) is None
    assert numbering.position(1, 1) == 2


@pytest.mark.django_db(transaction=True)
def test_a_broker_outage_after_commit_still_answers_2xx(as_user, people, fleet, settings, caplog):
    from quotaportal.celery import app
    from quotaportal.tick import requests as ticks

    settings.QP_IMMEDIATE_TICKS = True
    job = submit(people.alice, fleet, name="first")
    ticks.gate.release(fleet.queue.pk)  # a worker took the tick that submit queued
    before = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens there
    app.pool.force_close_all()
    caplog.set_level(logging.ERROR)
    try:
        client = as_user("alice")
        created = client.post("/api/v1/jobs/", JOB, format="json")
        bumped = client.patch(f"/api/v1/jobs/{job.pk}/", {"scheduling_priority": 5}, format="json")
        ended = client.post(f"/api/v1/jobs/{job.pk}/terminate/", {}, format="json")
    finally:
        app.conf.broker_url = before
        app.pool.force_close_all()
    assert (created.status_code, bumped.status_code, ended.status_code) == (201, 200, 200)
    assert Job.objects.filter(name="train").exists()
    assert "the next beat will tick it" in caplog.text
    connection.close()


def test_the_web_agent_token_form_on_a_simulated_environment_explains(people, fleet, client):
    client.force_login(people.admin)
    response = client.post(f"/environments/{fleet.env.pk}/agent-token/", follow=True)
    assert response.status_code == 200
    assert "agents join LOCAL environments" in response.content.decode()


def test_production_mode_logs_errors_with_tracebacks_to_stderr(repo):
    script = (
        "import django, logging; django.setup()\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n"
        "    logging.getLogger('django.request').exception('Internal Server Error: /x')\n"
    )
    env = {
        "QP_DEBUG": "false",
        "QP_SECRET_KEY": "k",
        "DJANGO_SETTINGS_MODULE": "quotaportal.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Internal Server Error: /x" in done.stderr
    assert "ZeroDivisionError" in done.stderr, "the traceback is logged"


@override_settings(QP_HEALTH_TICK_AGE=30)
def test_healthz_is_unhealthy_when_a_queue_has_not_ticked(client, fleet):
    from datetime import timedelta

    from django.utils import timezone

    from quotaportal.infra.worker_health import record_worker_alive
    from quotaportal.quotas.models import JobQueue

    record_worker_alive("test-worker")  # what a running Celery worker does every few seconds
    assert client.get("/healthz").status_code == 200, "a new queue gets time for a first tick"
    JobQueue.objects.filter(pk=fleet.queue.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )
    stale = client.get("/healthz")
    assert stale.status_code == 503
    assert "no scheduler tick" in stale.json()["reason"]
    assert "gpu" in stale.json()["reason"]
    run_tick(fleet.queue.id)
    assert client.get("/healthz").status_code == 200


def test_every_field_error_is_a_list_and_unknown_statuses_are_refused(as_user, fleet):
    never = as_user("alice").post("/api/v1/jobs/", {**JOB, "quantity": 9}, format="json")
    assert never.status_code == 400
    assert isinstance(never.json()["quantity"], list)
    assert "could never start" in never.json()["quantity"][0]
    bogus = as_user("alice").get("/api/v1/jobs/?status=bogus")
    assert bogus.status_code == 400
    assert "RUNNABLE" in bogus.json()["status"][0]


def test_the_api_docs_lead_back_to_the_portal(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "[Back to the portal](/)" in schema
