"""Outages and oversize or deeply nested bodies answer in each interface's format: a JSON 503
that names what is down (REST, probes), a page of the product (web), never a bare HTML 500;
/healthz says what is wrong. The database really is unreachable in these tests: the
connection is pointed at a closed port, not replaced by a stand-in."""

from __future__ import annotations

import json
import socket

import pytest
from django.db import connection
from django.test import override_settings

from quotaportal.infra.redis_client import client as redis_client
from quotaportal.infra.worker_health import key, queue_key, record_worker_alive
from tests.builders import submit

JOB = {"job_queue": "gpu", "quota_share": "vision", "capacity_unit": "a100", "name": "train"}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def database_down(transactional_db):
    """The default connection points at a port where nothing listens, until the test ends."""
    settings_dict = connection.settings_dict
    saved = (settings_dict["HOST"], settings_dict["PORT"])
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", closed_port()
    yield
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = saved


@pytest.fixture
def worker_alive(settings):
    record_worker_alive("test-worker")
    yield
    redis_client(settings.REDIS_URL).delete(key())


def test_with_the_database_down_the_rest_api_answers_a_json_503(people, database_down):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens['alice']}")
    for response in (api.get("/api/v1/jobs/"), api.post("/api/v1/jobs/", JOB, format="json")):
        assert response.status_code == 503
        assert response["Content-Type"] == "application/json"
        assert "database is unavailable" in response.json()["detail"]
        assert response["Retry-After"] == "5"


@pytest.fixture
def signed_in(client, people):
    client.force_login(people.alice)
    return client


def test_with_the_database_down_pages_are_a_page_of_the_product(signed_in, database_down):
    response = signed_in.get("/jobs/")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "quotaportal is unavailable for a moment" in page
    assert "database is unavailable" in page


def test_with_the_database_down_healthz_says_so(client, database_down):
    response = client.get("/healthz")
    assert response.status_code == 503
    assert "the database does not answer: OperationalError" in response.json()["reason"]


@pytest.mark.django_db
def test_healthz_says_when_no_worker_has_reported(client, settings):
    redis_client(settings.REDIS_URL).delete(key())
    silent = client.get("/healthz")
    assert silent.status_code == 503
    assert "no Celery worker has reported" in silent.json()["reason"]
    record_worker_alive("test-worker")
    assert client.get("/healthz").status_code == 200


@pytest.mark.django_db
def test_healthz_says_which_tasks_no_worker_takes(client, settings):
    store = redis_client(settings.REDIS_URL)
    store.delete(key(), *(queue_key(queue) for queue in settings.CELERY_TASK_QUEUES))
    record_worker_alive("ticks@host", ["celery"])  # a worker started with -X background
    silent = client.get("/healthz")
    assert silent.status_code == 503
    assert "no Celery worker has taken the background tasks" in silent.json()["reason"]
    assert "-Q background" in silent.json()["reason"], "it says what to start"
    record_worker_alive("background@host", ["background"])
    assert client.get("/healthz").status_code == 200


@pytest.mark.django_db
def test_healthz_says_when_the_broker_does_not_answer(client, worker_alive):
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0"):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert "the broker (Redis) does not answer" in response.json()["reason"]


@pytest.mark.django_db
def test_an_unexpected_error_on_the_api_is_a_json_500_without_details(client, monkeypatch):
    from quotaportal import failures

    try:
        raise ZeroDivisionError("secret detail")
    except ZeroDivisionError:
        request = client.get("/api/v1/").wsgi_request
        response = failures.server_error(request)
    assert response.status_code == 500
    body = json.loads(response.content)
    assert "logged" in body["detail"]
    assert "secret" not in response.content.decode()


@pytest.mark.parametrize("depth", [33, 10_000])
def test_deeply_nested_json_is_a_400_that_says_to_flatten_it(as_user, people, fleet, depth):
    body = '{"service_request_payload": ' + "[" * depth + "]" * depth + "}"
    response = as_user("alice").generic(
        "POST", "/api/v1/jobs/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "more than 32 deep; flatten it" in response.json()["detail"]


def test_nesting_within_the_limit_is_taken(as_user, fleet):
    payload = {"a": [[[{"b": [1]}]]]}
    response = as_user("alice").post(
        "/api/v1/jobs/", {**JOB, "service_request_payload": payload}, format="json"
    )
    assert response.status_code == 201, response.content


def test_an_oversize_body_is_a_json_413_before_anything_reads_it(as_user, people, fleet, settings):
    job = submit(people.alice, fleet)
    huge = json.dumps({"command": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    response = as_user("alice").generic(
        "PATCH", f"/api/v1/jobs/{job.pk}/", huge, content_type="application/json"
    )
    assert response.status_code == 413
    assert "at most" in response.json()["detail"]
    page = as_user(None).generic("POST", "/jobs/submit/", huge, content_type="text/plain")
    assert page.status_code == 413
    assert page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_metrics_take_the_bearer_scheme_in_any_case(client, settings):
    settings.QP_METRICS_TOKEN, settings.QP_METRICS_ALLOWED_IPS = "t0ken", []
    for scheme in ("Bearer", "bearer", "BEARER"):
        assert client.get("/metrics", HTTP_AUTHORIZATION=f"{scheme} t0ken").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic t0ken").status_code == 401
