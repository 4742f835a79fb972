"""GET /api/v1/jobs/{id}/logs/: a job's whole output by offset or Range, for its team only."""

from __future__ import annotations

import pytest

from quotaportal.jobs.output import append_output
from quotaportal.quotas.models import JobAttempt
from tests.builders import submit


@pytest.fixture
def printed(people, fleet):
    job = submit(people.alice, fleet, name="printer")
    attempt = JobAttempt.objects.create(job=job, number=1)
    append_output(attempt.pk, 0, 0, b"".join(b"line %d\n" % i for i in range(1000)), final=True)
    return job


def test_the_whole_output_by_offset_with_where_to_read_on(as_user, printed):
    answer = as_user("alice").get(f"/api/v1/jobs/{printed.pk}/logs/?offset=0&limit=14")
    assert answer.status_code == 200
    assert answer.content == b"line 0\nline 1\n"
    assert answer["X-QP-Next-Offset"] == "14"
    assert answer["X-QP-Complete"] == "false"
    assert (answer["X-QP-Attempt"], answer["X-QP-Ranks"]) == ("1", "0")
    rest = as_user("alice").get(f"/api/v1/jobs/{printed.pk}/logs/?offset=14")
    assert rest.content.startswith(b"line 2\n")
    assert rest.content.endswith(b"line 999\n")
    assert rest["X-QP-Complete"] == "true"


def test_a_range_header_answers_206_with_content_range(as_user, printed):
    answer = as_user("alice").get(f"/api/v1/jobs/{printed.pk}/logs/", HTTP_RANGE="bytes=7-13")
    assert answer.status_code == 206
    assert answer.content == b"line 1\n"
    size = answer["X-QP-Size"]
    assert answer["Content-Range"] == f"bytes 7-13/{size}" or answer["Content-Range"].endswith("/*")
    bad = as_user("alice").get(f"/api/v1/jobs/{printed.pk}/logs/", HTTP_RANGE="bytes=9-3")
    assert bad.status_code == 400


def test_another_team_cannot_read_the_output(as_user, printed):
    answer = as_user("bob").get(f"/api/v1/jobs/{printed.pk}/logs/")
    assert answer.status_code == 403
    assert "its team" in answer.json()["detail"]
    assert as_user(None).get(f"/api/v1/jobs/{printed.pk}/logs/").status_code in (401, 403)


@pytest.mark.parametrize("query", ["offset=-1", "rank=x", "limit=0", "attempt=0"])
def test_bad_queries_get_a_400(as_user, printed, query):
    assert as_user("alice").get(f"/api/v1/jobs/{printed.pk}/logs/?{query}").status_code == 400
