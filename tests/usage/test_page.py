"""The usage page: the report's figures in words people read, per team or person, with the
same CSV the REST API gives."""

from __future__ import annotations

import pytest
from django.test import Client

from quotaportal.usage import rollup
from tests.usage import story

pytestmark = pytest.mark.django_db


@pytest.fixture
def reclaimed(people, fleet):
    return story.reclaimed(people, fleet, story.hours_ago(3))


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_reads_each_teams_use(people, fleet, reclaimed):
    rollup.roll_up()
    page = signed_in(people.admin).get("/usage/?period=24h&group_by=team")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-key="vision"' in text
    assert 'data-key="nlp"' in text
    assert '<td data-label="Own" class="num">2.00' in text  # nlp's: 2 instances for an hour
    assert 'data-testid="usage-chart"' in text
    assert "format=csv" in text


def test_a_scientist_sees_only_their_teams(people, fleet, reclaimed):
    text = signed_in(people.bob).get("/usage/?period=24h").content.decode()
    assert 'data-key="nlp"' in text
    assert 'data-key="vision"' not in text
    assert "You see your teams' rows" in text


def test_by_user_lent_capacity_is_not_a_persons(people, fleet, reclaimed):
    text = signed_in(people.admin).get("/usage/?period=24h&group_by=user").content.decode()
    assert 'data-key="alice"' in text
    assert 'data-key=""' not in text


def test_a_bad_custom_period_says_what_to_fix(people, fleet):
    page = signed_in(people.admin).get("/usage/?period=custom&start=" + "9" * 500)
    assert page.status_code == 400
    text = page.content.decode()
    assert "is not an ISO 8601 time" in text
    assert "9" * 100 not in text  # a long bad value is not echoed in full


def test_signing_in_is_required(client):
    page = client.get("/usage/")
    assert page.status_code == 302
    assert "/login/" in page["Location"]
