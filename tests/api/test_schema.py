"""The OpenAPI schema is valid, the docs work offline, and fuzzing the API finds no 5xx."""

from __future__ import annotations

import os
import re
from io import StringIO

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from quotaportal.wsgi import application


@pytest.mark.django_db
def test_the_openapi_schema_validates_without_warnings():
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    assert "/api/v1/jobs/{id}/terminate/" in out.getvalue()


@pytest.mark.django_db
def test_the_api_docs_load_nothing_from_the_internet(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "drf_spectacular_sidecar" in html
    assert not re.search(r"(src|href)=\"https?://", html)


schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture
def admin_headers(people, fleet):
    # Like Django's test client: keep the test's database connection open across requests.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield {"Authorization": f"Token {people.tokens['ada']}"}
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("QP_FUZZ_EXAMPLES", "12")),  # more for a deeper local run
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
@pytest.mark.django_db
def test_no_request_makes_the_api_fail_with_a_server_error(case, admin_headers):
    case.call_and_validate(headers=admin_headers, checks=[not_a_server_error])
