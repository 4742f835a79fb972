"""One capacity, shown the same everywhere: a reservation on a LOCAL environment adds only
what its READY hosts can hold, and the environment page, the environment list, the
dashboard, the fleet page, /metrics, the timeline of changes ahead and the planner agree."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.utils import timezone

from quotaportal.hosts import services as host_services
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.quotas.services import reservations
from quotaportal.tick.run import run_tick
from tests.builders import TOKEN, add_share, build_queue, samples, value

pytestmark = pytest.mark.django_db


@pytest.fixture
def local(people):
    """LOCAL, max capacity 3, one host with 3 GPUs; a reservation of +2 active for an hour."""
    env, queue = build_queue(people.admin, capacity=3, backend="LOCAL", env_name="local")
    add_share(people.admin, queue, "vision", "vision", 1, "LEND_AND_BORROW")
    add_share(people.admin, queue, "nlp", "nlp", 2, "LEND")
    token = host_services.token_for(host_services.create_agent_token(None, env, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="a100", gpus=[0, 1, 2])
    now = timezone.now()
    reservations.create_reservation(
        people.admin,
        env,
        name="plan-a",
        capacity_unit="a100",
        instances=2,
        starts_at=now - timedelta(minutes=1),
        ends_at=now + timedelta(hours=1),
    )
    return env, queue


def page(user, path):
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, path
    return response.content.decode()


def text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)))


def test_every_page_and_metrics_show_the_hosts_capacity(settings, people, local):
    env, queue = local
    shown = text(page(people.admin, f"/manage/environments/{env.pk}/"))
    assert "now: 3 a100" in shown
    assert "allow 5 a100, but the READY hosts' slots give 3" in shown
    # The change ahead names the capacity after it, not a drop from the settings' 5.
    assert "(plan-a ends): a100 stays 3 (the READY hosts' slots hold it at 3)" in shown
    assert "3 a100" in text(page(people.admin, "/manage/environments/"))
    assert "capacity 3 × a100" in text(page(people.admin, "/"))
    assert "Capacity now: 3 × a100" in text(page(people.admin, "/fleet/"))
    settings.QP_METRICS_TOKEN, settings.QP_METRICS_ALLOWED_IPS = TOKEN, []
    metrics = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    found = samples(metrics)
    labels = {"service_environment": "local", "capacity_unit": "a100"}
    assert value(found, "quotaportal_environment_capacity", **labels) == 3


def test_the_planner_uses_what_the_pages_show(people, local):
    """A borrower holds the 3 GPUs; the lender's 2-instance job takes 2 back: with 3
    instances shown, nothing is spare, and exactly the borrowed instances are preempted."""
    _, queue = local
    borrower = services.submit_job(
        people.alice,
        job_queue=queue,
        quota_share="vision",
        capacity_unit="a100",
        name="b",
        quantity=3,
    )
    run_tick(queue.id)
    assert Job.objects.get(pk=borrower.pk).status == "SCHEDULED"
    lender = services.submit_job(
        people.bob,
        job_queue=queue,
        quota_share="nlp",
        capacity_unit="a100",
        name="l",
        quantity=2,
    )
    run_tick(queue.id)
    assert Job.objects.get(pk=borrower.pk).preempted_count == 1
    shown = text(page(people.admin, "/"))
    assert "capacity 3 × a100" in shown
    assert Job.objects.get(pk=lender.pk).status == "SCHEDULED"
