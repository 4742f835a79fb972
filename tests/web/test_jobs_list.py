"""The jobs list's filter by submitter (web and REST) and its live fragment."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.builders import submit


@pytest.mark.django_db
def test_jobs_filter_by_who_submitted_them_on_the_page_and_over_rest(people, fleet, client):
    submit(people.alice, fleet, name="alices")
    submit(people.bob, fleet, share="nlp", name="bobs")
    client.force_login(people.admin)
    page = client.get("/jobs/?user=bob").content.decode()
    assert 'data-job="bobs"' in page
    assert 'data-job="alices"' not in page
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens['ada']}")
    names = [job["name"] for job in api.get("/api/v1/jobs/?user=alice").json()["results"]]
    assert names == ["alices"]


@pytest.mark.django_db
def test_the_rows_refresh_as_a_fragment_keeping_the_filters(people, fleet, client):
    submit(people.alice, fleet, name="alices")
    client.force_login(people.alice)
    fragment = client.get("/jobs/?name=ali", headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="rows"')
    assert 'hx-get="/jobs/?name=ali&amp;page=1"' in fragment
    assert 'data-job="alices"' in fragment
