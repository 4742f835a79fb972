"""A submit's checks read rows cached between requests (quotas.config_cache): every change to those
rows is seen by the next submit, in this process or another, as if nothing were cached."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.quotas import config_cache, services
from quotaportal.quotas.models import QuotaShare, ShareCapacityLimit, Team
from quotaportal.quotas.services import accounts, reservations

pytestmark = pytest.mark.usefixtures("cached_in_redis")


def post(people, fleet, user="alice", **fields):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens[user]}")
    body = {"job_queue": fleet.queue.name, "quota_share": "vision", "capacity_unit": "a100"}
    return client.post("/api/v1/jobs/", {**body, "name": "j", **fields}, format="json")


def queries_of(people, fleet, **fields) -> int:
    # A token's use is written once a minute: a read first has written it.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {people.tokens[fields.get('user', 'alice')]}")
    assert client.get("/api/v1/job-queues/").status_code == 200
    with CaptureQueriesContext(connection) as captured:
        assert post(people, fleet, **fields).status_code == 201
    return len(captured.captured_queries)


def test_a_second_submit_reads_none_of_the_rows_it_is_checked_against(people, fleet):
    cold = queries_of(people, fleet)
    warm = queries_of(people, fleet)
    # queue, share, teams, unit, capacity, the end of its first reservation, limits (the token
    # was cached by the read before each: test_cached_tokens counts its lookups)
    assert cold - warm == 7


def test_without_redis_nothing_is_cached(people, fleet, settings):
    settings.REDIS_URL = ""
    assert queries_of(people, fleet) == queries_of(people, fleet)


def test_a_lowered_environment_capacity_refuses_the_next_big_submit(people, fleet):
    assert post(people, fleet, quantity=4).status_code == 201
    services.update_service_environment(people.admin, fleet.env, capacity_limits={"a100": 3})
    refused = post(people, fleet, quantity=4)
    assert refused.status_code == 400
    assert "quantity" in refused.json()


def test_a_member_removed_from_the_team_is_refused_at_once(people, fleet):
    assert post(people, fleet).status_code == 201
    accounts.remove_member(people.admin, Team.objects.get(name="vision"), people.alice)
    assert post(people, fleet).status_code == 403


def test_a_member_added_may_submit_at_once(people, fleet):
    assert post(people, fleet, user="bob").status_code == 403
    Team.objects.get(name="vision").members.add(people.bob)  # as the Django admin's form does
    assert post(people, fleet, user="bob").status_code == 201


def test_a_disabled_queue_and_a_deleted_share_are_seen_by_the_next_submit(people, fleet):
    assert post(people, fleet).status_code == 201
    services.update_job_queue(people.admin, fleet.queue, state="DISABLED")
    assert "DISABLED" in post(people, fleet).json()["job_queue"][0]
    services.update_job_queue(people.admin, fleet.queue, state="ENABLED")
    assert post(people, fleet, quota_share="nlp", user="bob").status_code == 201
    QuotaShare.objects.filter(pk=fleet.nlp.pk).delete()
    gone = post(people, fleet, quota_share="nlp", user="bob")
    assert gone.status_code == 400
    assert "does not exist" in gone.json()["quota_share"][0]


def test_another_process_change_is_seen_through_the_generation(people, fleet, settings):
    """A change committed elsewhere raises the generation in Redis; here only that is seen."""
    assert post(people, fleet, quantity=4).status_code == 201
    fleet.env.capacity_limits.update(max_capacity=1)  # a row change this process sent no signal for
    assert post(people, fleet, quantity=4).status_code == 201, "cached: not looked up again"
    redis.Redis.from_url(settings.REDIS_URL).incr(
        config_cache.generation_key()
    )  # the other's commit
    assert post(people, fleet, quantity=4).status_code == 400


def test_capacity_a_reservation_adds_is_cached_no_longer_than_the_reservation(people, fleet):
    now = timezone.now()
    reservations.create_reservation(
        people.admin,
        fleet.env,
        name="burst",
        capacity_unit="a100",
        instances=4,
        starts_at=now,
        ends_at=now + timedelta(seconds=1.5),
    )
    assert post(people, fleet, quantity=6).status_code == 201, "4 + 4 reserved"
    time.sleep(1.6)
    assert post(people, fleet, quantity=6).status_code == 400, "the reservation is over"


def test_limits_rewritten_in_bulk_are_seen(people, fleet):
    assert post(people, fleet, quantity=2).status_code == 201
    services.update_share(
        people.admin, fleet.vision, capacity_limits={"a100": 1}, sharing_strategy="RESERVE"
    )
    assert ShareCapacityLimit.objects.get(share=fleet.vision).max_capacity == 1
    refused = post(people, fleet, quantity=2)
    assert refused.status_code == 400, "a RESERVE share of 1 never runs 2"


def count_generation_reads(monkeypatch) -> list:
    reads = []
    real = config_cache._current
    monkeypatch.setattr(config_cache, "_current", lambda: reads.append(1) or real())
    return reads


def test_a_request_reads_the_generation_once(people, fleet, monkeypatch):
    reads = count_generation_reads(monkeypatch)
    assert post(people, fleet).status_code == 201  # its token's check, then its submit
    assert len(reads) == 1
    assert post(people, fleet).status_code == 201
    assert len(reads) == 2  # each request reads it afresh


def test_outside_a_request_every_lookup_reads_the_generation(people, fleet, monkeypatch):
    reads = count_generation_reads(monkeypatch)
    config_cache.cached_lookups()
    config_cache.cached_lookups()
    assert len(reads) == 2


def test_a_change_within_a_request_is_seen_by_its_later_lookups(people, fleet):
    assert post(people, fleet).status_code == 201
    config_cache._request_started(None)
    try:
        before = config_cache.cached_lookups()
        services.update_service_environment(people.admin, fleet.env, capacity_limits={"a100": 3})
        assert config_cache.cached_lookups() is not before
    finally:
        config_cache._request_finished(None)
