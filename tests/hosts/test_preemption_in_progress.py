"""A LOCAL job preempted while its rank still runs stays RUNNING (PREEMPTION_IN_PROGRESS) to
everyone, and out of every plan, until the rank has stopped (its exit report, a heartbeat that
no longer runs it, or the tick's sweep when that record was lost); then it waits again."""

from __future__ import annotations

import pytest
from django.utils import timezone

from quotaportal.awsbatch.described_jobs import describe_shape
from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import Placement
from quotaportal.notifications.envelopes import notices
from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, Job, shown_status_is
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def preempted(people, settings):
    """One GPU; `low` ran on it and was preempted (in its share) by `high`, its rank still
    running out its grace period."""
    settings.QP_HOST_TIMEOUT = 60
    env, queue = build_queue(people.admin, unit="gpu1", capacity=1, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 1, "LEND", unit="gpu1", in_share_preemption=True)
    token = host_services.token_for(host_services.create_agent_token(people.admin, env, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="gpu1", gpus=[0])

    def submit(name, priority):
        return services.submit_job(
            people.alice,
            job_queue=queue,
            quota_share="a",
            capacity_unit="gpu1",
            name=name,
            scheduling_priority=priority,
        )

    low = submit("low", 1)
    run_tick(queue.pk)
    handed = host_services.heartbeat(token, "gpu-1", [])["placements"]
    assert Job.objects.get(pk=low.pk).status == "STARTING"  # handed to its host
    placement = handed[0]["placement"]
    host_services.report(token, "gpu-1", placement=placement, event="started")
    assert Job.objects.get(pk=low.pk).status == "RUNNING"
    high = submit("high", 9)
    run_tick(queue.pk)
    return token, queue, placement, Job.objects.get(pk=low.pk), Job.objects.get(pk=high.pk)


def test_the_victim_shows_running_in_preemption_and_is_planned_by_no_tick(preempted):
    token, queue, placement, low, high = preempted
    assert (low.status, low.preemption_stopping, high.status) == ("RUNNABLE", True, "SCHEDULED")
    assert low.shown_status == "RUNNING"
    assert describe_shape(low)["status"] == "RUNNING"
    assert describe_shape(low)["statusReason"].startswith("PREEMPTION_IN_PROGRESS: In-share")
    assert list(Job.objects.filter(shown_status_is("RUNNING"))) == [low]
    assert not Job.objects.filter(shown_status_is("RUNNABLE")).exists()
    Job.objects.filter(pk=high.pk).update(status="SUCCEEDED")  # the GPU is free to the planner
    run_tick(queue.pk)
    low.refresh_from_db()
    assert low.status == "RUNNABLE"
    assert low.attempts.count() == 1, "not started again while its rank stops"


def test_its_rank_s_exit_ends_the_preemption_and_it_waits_again(preempted):
    token, queue, placement, low, high = preempted
    host_services.report(token, "gpu-1", placement=placement, event="exited", exit_code=143)
    low.refresh_from_db()
    assert (low.status, low.preemption_stopping, low.shown_status) == (
        "RUNNABLE",
        False,
        "RUNNABLE",
    )
    assert low.status_reason == (
        "Preempted by a higher-priority job of its share (in-share); waiting to run again"
    )
    completed = Event.objects.get(job=low, kind=EventKind.PREEMPTION_COMPLETED)
    assert completed.detail["requeued"] is True
    kinds = [(n.detail_type, n.status) for n in notices(completed, low)]
    assert kinds == [
        ("Batch Service Job Preemption Completed", "RUNNABLE"),
        ("Batch Service Job State Change", "RUNNABLE"),
    ]
    started = Event.objects.get(job=low, kind=EventKind.PREEMPTED_IN_SHARE)
    assert [n.detail_type for n in notices(started, low)] == [
        "Batch Service Job Preemption Started"
    ]  # no RUNNABLE yet: it was still running
    # A second report of the same exit (a retried batch) releases nothing twice.
    host_services.report(token, "gpu-1", placement=placement, event="exited", exit_code=143)
    assert Event.objects.filter(job=low, kind=EventKind.PREEMPTION_COMPLETED).count() == 1


def test_the_tick_completes_a_preemption_whose_last_exit_went_unrecorded(preempted):
    token, queue, placement, low, high = preempted
    Placement.objects.filter(pk=placement).update(exited_at=timezone.now())  # as if lost
    run_tick(queue.pk)
    low.refresh_from_db()
    assert not low.preemption_stopping
    assert low.shown_status == "RUNNABLE"
    assert Event.objects.get(job=low, kind=EventKind.PREEMPTION_COMPLETED).detail["requeued"]


def test_a_victim_terminated_while_it_stops_is_failed_not_requeued(preempted, people):
    token, queue, placement, low, high = preempted
    services.terminate_job(people.alice, low, "not needed any more")
    assert Job.objects.get(pk=low.pk).shown_status == "FAILED"
    host_services.report(token, "gpu-1", placement=placement, event="exited", exit_code=143)
    completed = Event.objects.get(job=low, kind=EventKind.PREEMPTION_COMPLETED)
    assert completed.detail["requeued"] is False
    low.refresh_from_db()
    assert [n.status for n in notices(completed, low)] == ["FAILED"]


def test_a_heartbeat_that_no_longer_runs_the_rank_ends_the_preemption(preempted):
    """The agent stopped the rank and lost its exit report (it restarted): its word that it
    runs nothing more closes the placement, and the preemption with it."""
    token, queue, placement, low, high = preempted
    host_services.heartbeat(token, "gpu-1", [], heard_up_to=placement)
    low.refresh_from_db()
    assert not low.preemption_stopping
    assert Event.objects.get(job=low, kind=EventKind.PREEMPTION_COMPLETED).detail["requeued"]


def test_the_job_page_says_its_ranks_are_stopping(preempted, client, people):
    token, queue, placement, low, high = preempted
    client.force_login(people.alice)
    page = client.get(f"/jobs/{low.pk}/").content.decode()
    assert 'data-testid="status">RUNNING<' in page
    assert "its ranks are stopping" in page
    listed = client.get("/jobs/?status=RUNNING").content.decode()
    assert str(low.pk) in listed
