"""/metrics: refused unless the scraper authenticates; after a few ticks every figure parsed
with prometheus-client's own text parser matches the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from quotaportal.hosts import services as host_services
from quotaportal.quotas import services
from quotaportal.quotas.models import DISPATCHED, Job, SchedulerRun
from quotaportal.quotas.services import reservations
from quotaportal.tick.run import run_tick
from tests.builders import TOKEN, samples, submit, value

pytestmark = pytest.mark.django_db


def scrape(client, **headers):
    return client.get("/metrics", **headers)


def test_a_scrape_is_refused_when_nothing_is_configured(client, settings):
    settings.QP_METRICS_TOKEN, settings.QP_METRICS_ALLOWED_IPS = "", []
    answer = scrape(client, HTTP_AUTHORIZATION="Bearer anything")
    assert answer.status_code == 403
    assert b"QP_METRICS_TOKEN" in answer.content


def test_a_scrape_without_the_token_or_with_a_wrong_one_is_refused(client, settings):
    settings.QP_METRICS_TOKEN, settings.QP_METRICS_ALLOWED_IPS = TOKEN, []
    assert scrape(client).status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_an_allowed_address_may_scrape_without_a_token(client, settings):
    import ipaddress

    settings.QP_METRICS_TOKEN = ""
    settings.QP_METRICS_ALLOWED_IPS = [ipaddress.ip_network("10.0.0.0/8")]
    assert scrape(client, REMOTE_ADDR="10.1.2.3").status_code == 200
    assert scrape(client, REMOTE_ADDR="192.168.1.1").status_code == 403


def test_figures_match_the_database_after_a_few_ticks(client, settings, people, fleet):
    settings.QP_METRICS_TOKEN = TOKEN
    now = timezone.now()
    reservations.create_reservation(
        people.admin,
        fleet.env,
        name="plan",
        capacity_unit="a100",
        instances=2,
        starts_at=now - timedelta(minutes=1),
        ends_at=now + timedelta(hours=1),
    )
    for index in range(5):
        submit(people.alice, fleet, "vision", f"v{index}", scheduling_priority=1)
    run_tick(fleet.queue.id)
    for index in range(3):
        submit(people.bob, fleet, "nlp", f"n{index}")
    run_tick(fleet.queue.id)
    run_tick(fleet.queue.id)
    lab = services.create_service_environment(
        people.admin, name="lab", backend="LOCAL", capacity_limits={"a100": 2}
    )
    token = host_services.token_for(host_services.create_agent_token(None, lab, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="a100", gpus=[0, 1])

    answer = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/plain; version=")
    found = samples(answer.content.decode())

    def jobs(**filters) -> int:
        return Job.objects.filter(job_queue=fleet.queue, **filters).count()

    for share in ("vision", "nlp"):
        runnable = Job.objects.filter(share_name=share, status="RUNNABLE")
        for reason in set(runnable.values_list("pending_reason", flat=True)):
            assert (
                value(
                    found,
                    "quotaportal_pending_jobs",
                    job_queue="gpu",
                    quota_share=share,
                    reason=reason,
                )
                == runnable.filter(pending_reason=reason).count()
            )
        used = (
            Job.objects.filter(share_name=share, status__in=DISPATCHED).aggregate(
                n=Sum("quantity")
            )["n"]
            or 0
        )
        labels = {"job_queue": "gpu", "quota_share": share, "capacity_unit": "a100"}
        assert value(found, "quotaportal_quota_used", **labels) == used
        assert value(found, "quotaportal_quota_limit", **labels) == 2
        assert value(found, "quotaportal_quota_borrowed", **labels) == max(0, used - 2)
    total_dispatched = sum(
        v for (name, _), v in found.items() if name == "quotaportal_dispatched_jobs_total"
    )
    assert total_dispatched == jobs(status__in=DISPATCHED) + jobs(preempted_count__gt=0)
    preempted = sum(
        v for (name, _), v in found.items() if name == "quotaportal_preempted_jobs_total"
    )
    assert preempted == sum(Job.objects.values_list("preempted_count", flat=True))
    assert preempted > 0, "nlp's jobs took back the capacity vision borrowed"
    assert (
        value(
            found,
            "quotaportal_environment_capacity",
            service_environment="sim",
            capacity_unit="a100",
        )
        == 6
    )
    assert (
        value(
            found,
            "quotaportal_environment_reserved_capacity",
            service_environment="sim",
            capacity_unit="a100",
        )
        == 2
    )
    runs = SchedulerRun.objects.filter(job_queue=fleet.queue)
    assert value(found, "quotaportal_tick_duration_seconds_count", job_queue="gpu") == runs.count()
    assert (
        value(found, "quotaportal_tick_duration_seconds_bucket", job_queue="gpu", le="+Inf")
        == runs.count()
    )
    assert value(found, "quotaportal_tick_duration_seconds_sum", job_queue="gpu") == pytest.approx(
        sum(r.duration_ms for r in runs) / 1000, rel=1e-6
    )
    assert value(found, "quotaportal_skipped_ticks_total", job_queue="gpu") == 0
    assert value(found, "quotaportal_hosts", service_environment="lab", state="READY") == 1
    age = value(
        found, "quotaportal_host_heartbeat_age_seconds", service_environment="lab", host="gpu-1"
    )
    assert 0 <= age < 60
    # Pruning old scheduler runs never makes a counter go back.
    runs.delete()
    again = samples(scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert value(again, "quotaportal_tick_duration_seconds_count", job_queue="gpu") == 3
