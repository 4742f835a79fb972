"""The job lifecycle of docs/concepts.md (Job lifecycle) on the SIMULATED backend."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from quotaportal.quotas import services
from quotaportal.quotas.models import Event, Job
from quotaportal.tick.run import run_tick
from tests.builders import submit


def tick(fleet, at):
    return run_tick(fleet.queue.id, now=at)


def reload(job):
    return Job.objects.get(pk=job.pk)


def test_a_simulated_job_runs_from_the_next_tick_and_ends_after_its_duration(people, fleet):
    t0 = timezone.now()
    job = submit(people.alice, fleet, simulated_duration_seconds=10)
    tick(fleet, t0)
    assert reload(job).status == "SCHEDULED"
    tick(fleet, t0 + timedelta(seconds=1))
    assert reload(job).status == "RUNNING"
    tick(fleet, t0 + timedelta(seconds=5))
    assert reload(job).status == "RUNNING"
    tick(fleet, t0 + timedelta(seconds=12))
    job = reload(job)
    assert (job.status, job.attempts.get().exit_code) == ("SUCCEEDED", 0)


def test_a_failed_attempt_is_retried_while_attempts_remain(people, fleet):
    job = submit(people.alice, fleet, retry_attempts=2)
    tick(fleet, timezone.now())
    services.end_attempt(job, succeeded=False, status_reason="Received status from SageMaker: boom")
    assert reload(job).status == "RUNNABLE"
    tick(fleet, timezone.now())
    services.end_attempt(job, succeeded=False, status_reason="Received status from SageMaker: boom")
    job = reload(job)
    assert (job.status, job.attempt_count, job.attempts.count()) == ("FAILED", 2, 2)
    assert list(Event.objects.filter(job=job).values_list("kind", flat=True).order_by("id")) == [
        "submitted",
        "dispatched",
        "retried",
        "dispatched",
        "failed",
    ]


def test_an_exit_rule_stops_retries(people, fleet):
    rules = [{"action": "EXIT", "on_status_reason": "ValidationException*"}]
    job = submit(people.alice, fleet, retry_attempts=5, evaluate_on_exit=rules)
    tick(fleet, timezone.now())
    services.end_attempt(job, succeeded=False, status_reason="ValidationException: bad input")
    assert reload(job).status == "FAILED"


def test_attempt_duration_counts_from_running(people, fleet):
    t0 = timezone.now()
    job = submit(people.alice, fleet, attempt_duration_seconds=30, retry_attempts=1)
    tick(fleet, t0)
    tick(fleet, t0 + timedelta(seconds=100))  # starts RUNNING now
    assert reload(job).status == "RUNNING"
    tick(fleet, t0 + timedelta(seconds=131))
    job = reload(job)
    assert (job.status, job.status_reason) == ("FAILED", "Attempt duration exceeded")


def test_preemption_requeues_without_using_an_attempt_until_retries_run_out(people, fleet):
    t0 = timezone.now()
    borrowers = [
        submit(people.alice, fleet, name=f"v{i}", preemption_retries_before_termination=1)
        for i in range(4)
    ]
    tick(fleet, t0)
    submit(people.bob, fleet, share="nlp", name="n1")
    tick(fleet, t0 + timedelta(seconds=1))
    victim = reload(borrowers[3])  # the newest in share order
    assert (victim.status, victim.preempted_count, victim.attempt_count) == ("RUNNABLE", 1, 0)
    # Its attempt stopped with the preemption (SIMULATED): it waits again, and says why.
    assert victim.status_reason == (
        "Preempted: a lender took back its capacity (cross-share); waiting to run again"
    )
    assert victim.attempts.get().status_reason.startswith("PREEMPTION_IN_PROGRESS: Cross-share")
    assert victim.recent_preemptions[0]["kind"] == "cross_share"
    assert victim.attempts.get().preempted is True
    # It borrows again when capacity frees, and the second preemption exhausts its retries.
    services.finish_job(Job.objects.get(name="n1"), "SUCCEEDED")
    tick(fleet, t0 + timedelta(seconds=2))
    assert reload(victim).status == "SCHEDULED"
    submit(people.bob, fleet, share="nlp", name="n2")
    tick(fleet, t0 + timedelta(seconds=3))
    victim = reload(victim)
    assert (victim.status, victim.status_reason, victim.preempted_count) == (
        "FAILED",
        "Preemption retries exhausted",
        2,
    )
