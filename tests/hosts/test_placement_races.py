"""A GPU's placements never overlap in the database, whichever request closes a rank first.

The soak found a heartbeat closing a preempted rank (its agent no longer ran it) while a
report of that rank's exit was being applied: the heartbeat's UPDATE, filtered through a
join, overwrote the exit the report had dated with its own later time, after the next job's
start on that GPU.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import Placement
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from tests.conftest import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def preempted_rank(people, settings):
    """A rank that started on gpu-1 and whose attempt has ended (its job terminated) while
    the agent still stops it: the heartbeat that no longer lists it closes it."""
    settings.QP_HOST_TIMEOUT = 60
    env, queue = build_queue(people.admin, unit="gpu1", capacity=1, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 1, "LEND", unit="gpu1")
    token = host_services.token_for(host_services.create_agent_token(people.admin, env, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="gpu1", gpus=[0])
    job = services.submit_job(
        people.admin, job_queue=queue, quota_share="a", capacity_unit="gpu1", name="victim"
    )
    services.run_tick(queue.pk)
    placement = Placement.objects.get(attempt__job=job)
    host_services.report_many(token, "gpu-1", [{"placement": placement.pk, "event": "started"}])
    services.terminate_job(people.admin, Job.objects.get(pk=job.pk), "not needed")
    return token, placement.pk


def waiting_on_a_row_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def test_a_heartbeat_never_overwrites_the_exit_a_concurrent_report_dated(preempted_rank):
    token, placement = preempted_rank
    reported_exit = timezone.now() - timedelta(seconds=1)
    holding, release = threading.Event(), threading.Event()

    def report_in_progress():
        """What a batch of reports does: lock the rank, date its exit, commit a bit later."""
        try:
            with transaction.atomic():
                Placement.objects.select_for_update().get(pk=placement)
                Placement.objects.filter(pk=placement).update(exited_at=reported_exit)
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    def heartbeat():
        try:
            host_services.heartbeat(token, "gpu-1", running=[])
        finally:
            connection.close()

    report = threading.Thread(target=report_in_progress)
    report.start()
    assert holding.wait(10)
    beat = threading.Thread(target=heartbeat)
    beat.start()
    deadline = time.monotonic() + 10
    while not waiting_on_a_row_lock() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert waiting_on_a_row_lock(), "the heartbeat's close waits for the report's lock"
    release.set()
    report.join(10)
    beat.join(10)
    assert Placement.objects.get(pk=placement).exited_at == reported_exit
