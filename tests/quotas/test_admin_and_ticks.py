"""The admin shows every table; a change asks for an immediate tick once it commits."""

from __future__ import annotations

import pytest
from django.contrib import admin

from quotaportal.hosts.models import AgentToken, GpuHost, Placement
from quotaportal.quotas import models, tasks
from tests.builders import submit

TABLES = [
    models.Team,
    models.Membership,
    models.CapacityUnit,
    models.ServiceEnvironment,
    models.EnvironmentCapacity,
    models.SchedulingPolicy,
    models.JobQueue,
    models.QuotaShare,
    models.ShareCapacityLimit,
    models.Job,
    models.JobAttempt,
    models.Event,
    models.SchedulerRun,
    models.UtilizationSample,
    models.TickMemo,
    GpuHost,
    AgentToken,
    Placement,
]


@pytest.mark.parametrize("model", TABLES, ids=lambda m: m.__name__)
def test_every_table_has_an_admin_page(admin_client, people, fleet, model):
    submit(people.alice, fleet)
    url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    assert model in admin.site._registry
    assert admin_client.get(url).status_code == 200


def test_the_admin_is_read_only(admin_client, fleet):
    url = f"/admin/quotas/quotashare/{fleet.vision.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert admin_client.post(url, {"name": "renamed"}).status_code == 403


def test_a_submit_enqueues_a_tick_only_after_commit(
    people, fleet, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.QP_IMMEDIATE_TICKS = True
    sent = []
    monkeypatch.setattr(tasks.tick_queue_now, "delay", lambda queue_id: sent.append(queue_id))
    version = models.JobQueue.objects.get(pk=fleet.queue.pk).state_version
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        submit(people.alice, fleet)
        assert sent == []  # nothing leaves before the transaction commits
    # Each change registers the transaction's Changes again (so a rolled-back savepoint drops
    # only its own): one Changes, acting once.
    assert len({id(callback.__self__) for callback in callbacks}) == 1
    assert sent == [fleet.queue.id]
    # A submit leaves the queue's row alone: the new job raises the active-job count, which
    # is what tells the tick to plan again (tests/quotas/test_tick.py).
    assert models.JobQueue.objects.get(pk=fleet.queue.pk).state_version == version
