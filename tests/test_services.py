"""The project runs against the real services it is configured for."""

from __future__ import annotations

import os

import pytest
import redis
from django.conf import settings
from django.db import connection

from quotaportal.settings import envbool, envint


def test_tests_run_on_postgresql():
    # make test and CI set DATABASE_URL; a run that silently fell back to SQLite proves less.
    assert os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")), (
        "DATABASE_URL must point at PostgreSQL; run the tests with `make test`"
    )
    assert connection.vendor == "postgresql"


def test_redis_answers():
    assert settings.REDIS_URL, "REDIS_URL must be set; run the tests with `make test`"
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.set("quotaportal:test:ping", "pong", ex=10)
    assert client.get("quotaportal:test:ping") == b"pong"


@pytest.mark.django_db
def test_healthz_reports_the_database(client):
    from quotaportal.infra.worker_health import record_worker_alive

    record_worker_alive("test-worker")  # what a running Celery worker does every few seconds
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "postgresql"}


def test_env_helpers_reject_values_they_cannot_read(monkeypatch):
    monkeypatch.setenv("QP_FLAG", "maybe")
    with pytest.raises(ValueError, match="QP_FLAG must be true or false"):
        envbool("QP_FLAG", False)
    monkeypatch.setenv("QP_NUMBER", "two")
    with pytest.raises(ValueError, match="QP_NUMBER must be a whole number"):
        envint("QP_NUMBER", 1)
    monkeypatch.setenv("QP_FLAG", "off")
    assert envbool("QP_FLAG", True) is False
