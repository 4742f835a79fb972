"""Start-time estimates of RUNNABLE jobs, refreshed from a forward simulation of the queue."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick import bridge
from quotaportal.tick.run import run_tick
from quotaportal.whatif.estimates import refresh_all_estimates, refresh_estimates
from tests.builders import submit


def reload(job):
    return Job.objects.get(pk=job.pk)


def test_waiting_jobs_are_estimated_to_start_when_the_jobs_ahead_end(people, fleet):
    t0 = timezone.now().replace(microsecond=0)
    # nlp (LEND, limit 2 of 4) fills its limit with 60 s and 100 s jobs; two more wait.
    first = submit(people.bob, fleet, share="nlp", name="a", simulated_duration_seconds=60)
    second = submit(people.bob, fleet, share="nlp", name="b", simulated_duration_seconds=100)
    run_tick(fleet.queue.id, now=t0)
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=1))  # both RUNNING from t0+1
    assert {reload(first).status, reload(second).status} == {"RUNNING"}
    third = submit(people.bob, fleet, share="nlp", name="c", simulated_duration_seconds=30)
    fourth = submit(people.bob, fleet, share="nlp", name="d", simulated_duration_seconds=30)
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=2))
    assert reload(third).pending_reason == "SHARE_AT_LIMIT"

    now = t0 + timedelta(seconds=11)  # a has 50 s left, b 90 s
    assert refresh_estimates(fleet.queue, now=now) == 2
    assert reload(third).estimated_start_at == t0 + timedelta(seconds=61)
    assert reload(fourth).estimated_start_at == t0 + timedelta(seconds=91)


def test_durations_come_from_the_shares_recent_jobs_when_the_job_does_not_say(people, fleet):
    t0 = timezone.now().replace(microsecond=0)
    done = submit(people.bob, fleet, share="nlp", name="done")
    run_tick(fleet.queue.id, now=t0)
    services.mark_started(done, now=t0)
    services.end_attempt(
        done, succeeded=True, status_reason="done", exit_code=0, now=t0 + timedelta(seconds=40)
    )
    running = [submit(people.bob, fleet, share="nlp", name=f"r{i}") for i in range(2)]
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=50))
    for job in running:
        services.mark_started(job, now=t0 + timedelta(seconds=50))
    waiting = submit(people.bob, fleet, share="nlp", name="waiting")
    refresh_estimates(fleet.queue, now=t0 + timedelta(seconds=60))
    # The share's jobs of one instance take 40 s: the running ones end at 90.
    assert reload(waiting).estimated_start_at == t0 + timedelta(seconds=90)


def test_the_estimate_is_shown_on_the_job_page_in_the_list_and_in_the_api(people, fleet, client):
    t0 = timezone.now().replace(microsecond=0)
    for name in ("a", "b"):
        submit(people.bob, fleet, share="nlp", name=name, simulated_duration_seconds=600)
    run_tick(fleet.queue.id, now=t0)
    waiting = submit(people.bob, fleet, share="nlp", name="w", simulated_duration_seconds=5)
    assert refresh_all_estimates(now=t0 + timedelta(seconds=1)) == 1
    expected = reload(waiting).estimated_start_at
    assert expected is not None

    client.force_login(people.bob)
    page = client.get(f"/jobs/{waiting.pk}/").content.decode()
    assert 'data-testid="estimate"' in page
    assert expected.strftime("%Y-%m-%d %H:%M") in page
    assert "recent jobs of the same size" in page
    assert "starts in about" in client.get("/jobs/").content.decode()
    body = client.get(f"/api/v1/jobs/{waiting.pk}/").json()
    assert body["estimated_start_at"].startswith(expected.strftime("%Y-%m-%dT%H:%M"))


def test_a_started_job_shows_no_estimate(people, fleet, client):
    job = submit(people.bob, fleet, share="nlp", name="a")
    Job.objects.filter(pk=job.pk).update(estimated_start_at=timezone.now())
    run_tick(fleet.queue.id)
    client.force_login(people.bob)
    assert client.get(f"/api/v1/jobs/{job.pk}/").json()["estimated_start_at"] is None


def test_a_job_behind_jobs_running_longer_than_usual_gets_an_uncertain_range_not_zero(
    people, fleet, client
):
    """Two nlp jobs of the kind that usually takes 120 s have run 200 s already: the expected
    start is soon (they should be ending), but the range runs long (what has lasted this long
    may well last as long again) and the page says so, never 'in about 0 minutes'."""
    real = timezone.now().replace(microsecond=0)
    started = real - timedelta(seconds=200)
    t0 = started - timedelta(seconds=300)
    for index in range(3):  # the share's record: jobs of one instance take 120 s
        done = submit(people.bob, fleet, share="nlp", name=f"done{index}")
        at = t0 + timedelta(seconds=index)
        run_tick(fleet.queue.id, now=at)
        services.mark_started(done, now=at)
        services.end_attempt(
            done, succeeded=True, status_reason="ok", exit_code=0, now=at + timedelta(seconds=120)
        )
    long_ones = [submit(people.bob, fleet, share="nlp", name=f"long{i}") for i in range(2)]
    run_tick(fleet.queue.id, now=started)
    for job in long_ones:
        services.mark_started(job, now=started)
    waiting = submit(people.bob, fleet, share="nlp", name="waiting")
    now = real + timedelta(seconds=2)  # they have run 202 s
    refresh_estimates(fleet.queue, now=now)
    job = reload(waiting)
    assert job.estimated_start_at == now + timedelta(seconds=1), "expected: they end any moment"
    assert job.estimated_start_earliest <= job.estimated_start_at
    assert job.estimated_start_latest >= now + timedelta(seconds=800), "4 × the 202 s run so far"
    assert job.estimate_uncertain
    client.force_login(people.bob)
    page = client.get(f"/jobs/{waiting.pk}/").content.decode()
    assert 'data-testid="uncertain"' in page
    assert "likely between" in page
    assert "in about 0" not in page
    body = client.get(f"/api/v1/jobs/{waiting.pk}/").json()
    assert body["estimated_start_range"]["uncertain"] is True
    assert body["estimated_start_range"]["latest"] is not None


def test_only_the_first_waiting_jobs_in_serving_order_are_read_and_estimated(
    people, fleet, settings
):
    """The estimate reads the queue's first QP_ESTIMATE_MAX_WAITING waiting jobs across its
    shares, by priority then age (bridge.fronts), not the whole queue; the rest get none."""
    settings.QP_ESTIMATE_MAX_WAITING = 3
    t0 = timezone.now().replace(microsecond=0)
    for i in range(4):  # the four a100 busy for a minute, too urgent to be preempted
        submit(
            people.admin,
            fleet,
            share="nlp" if i < 2 else "vision",
            name=f"busy{i}",
            scheduling_priority=100,
            simulated_duration_seconds=60,
        )
    run_tick(fleet.queue.id, now=t0)
    assert Job.objects.filter(status="SCHEDULED").count() == 4
    old_low = submit(people.admin, fleet, share="nlp", name="old_low", simulated_duration_seconds=5)
    urgent = submit(
        people.admin,
        fleet,
        share="vision",
        name="urgent",
        scheduling_priority=50,
        simulated_duration_seconds=5,
    )
    later = [
        submit(people.admin, fleet, share=share, name=f"later{i}", simulated_duration_seconds=5)
        for i, share in enumerate(("vision", "nlp", "vision"))
    ]
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=1))

    fronts = bridge.read_fronts(fleet.queue, bridge.queue_terms(fleet.queue), t0, 3)
    waiting = [known.work.id for known in fronts if known.dispatched_at is None]
    assert waiting == [str(urgent.pk), str(old_low.pk), str(later[0].pk)]
    assert sum(known.dispatched_at is not None for known in fronts) == 4

    assert refresh_estimates(fleet.queue, now=t0 + timedelta(seconds=2)) == 3
    estimated = set(
        Job.objects.filter(estimated_start_at__isnull=False).values_list("name", flat=True)
    )
    assert estimated == {"urgent", "old_low", "later0"}

    settings.QP_ESTIMATE_MAX_WAITING = 1  # the others fall out of the front: theirs is cleared
    assert refresh_estimates(fleet.queue, now=t0 + timedelta(seconds=3)) == 1
    assert list(
        Job.objects.filter(estimated_start_at__isnull=False).values_list("name", flat=True)
    ) == ["urgent"]
    assert (
        not Job.objects.filter(status="RUNNABLE", estimated_start_latest__isnull=False)
        .exclude(name="urgent")
        .exists()
    )
