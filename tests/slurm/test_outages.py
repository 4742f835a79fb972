"""Slurm down is "Slurm unavailable", never "every job ended": slurmctld killed for a minute
while jobs are submitted, terminated and a preemption is due; and a Slurm job the portal has
no record of (its submit's record lost in a crash) is cancelled, so nothing runs twice."""

from __future__ import annotations

import time

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, Job
from quotaportal.slurm.models import SlurmJob, SlurmState
from tests.slurm.builders import GRACE, dispatched, slurm_states

pytestmark = pytest.mark.django_db(transaction=True)
OUTAGE_SECONDS = 60


def submit(user, portal, name, share, priority=0, **options):
    return services.submit_job(
        user,
        job_queue=portal.queue,
        quota_share=share,
        capacity_unit="a100",
        name=name,
        scheduling_priority=priority,
        command="sleep 900",
        **options,
    )


def live_slurm_jobs_per_job(portal) -> dict[str, int]:
    """Portal job -> how many of its Slurm jobs are not over (never more than one)."""
    counts: dict[str, int] = {}
    for row in SlurmJob.objects.filter(environment=portal.env, ended_at__isnull=True):
        name = row.attempt.job.name
        counts[name] = counts.get(name, 0) + 1
    return counts


def test_slurmctld_down_for_a_minute_loses_nothing_and_starts_nothing_twice(portal, cluster):
    """high runs on QS1's instance, med borrows QS2's, q3 runs on QS3's. With slurmctld
    down: QS2's own job comes (med must be preempted), q3 is terminated, QS1 submits one more.
    Nothing is started or stopped while Slurm cannot carry it out; once it is back, Slurm
    runs exactly what the plan has running."""
    sam, _ = services.create_user("sam", teams=["qs1"])
    quinn, _ = services.create_user("quinn", teams=["qs2"])
    ria, _ = services.create_user("ria", teams=["qs3"])
    submit(sam, portal, "high", "QS1", 3)
    submit(sam, portal, "med", "QS1", 2)
    submit(ria, portal, "q3", "QS3")
    portal.ticks_until(
        lambda: list(slurm_states(portal, cluster).values()) == ["RUNNING"] * 3,
        what="high, med and q3 to run",
    )

    # Its state written first: a crash before slurmctld saves a start brings the job back
    # PENDING, a lost run (its own test, below), not the outage this one is about.
    cluster.save_state()
    cluster.kill_controller()
    portal.tick()
    state = SlurmState.objects.get(environment=portal.env)
    assert state.failures == 1
    assert Event.objects.filter(kind=EventKind.SLURM_UNAVAILABLE).exists()
    # Retries for Slurm 22.05's own slip: for a few seconds after a restart that recovered
    # running steps, a new job on their node may fail at once ("srun: error: Unable to
    # create step … Invalid generic resource (gres) specification", exit code 1).
    submit(quinn, portal, "reclaim", "QS2", retry_attempts=5)
    services.terminate_job(ria, Job.objects.get(name="q3"), "not needed any more")
    submit(sam, portal, "later", "QS1", 1)
    down_until = time.monotonic() + OUTAGE_SECONDS
    while time.monotonic() < down_until:
        portal.tick()
        # Nothing is started or preempted while Slurm cannot carry it out.
        assert Job.objects.get(name="reclaim").status == "RUNNABLE"
        assert Job.objects.get(name="med").preempted_count == 0
        assert dispatched(portal) == {"high", "med"}
        time.sleep(1)
    assert SlurmState.objects.get(environment=portal.env).failures >= 2

    cluster.start_controller()
    portal.ticks_until(
        lambda: SlurmState.objects.get(environment=portal.env).failures == 0,
        seconds=90,
        what="the portal to reach Slurm again",
    )
    assert Event.objects.filter(kind=EventKind.SLURM_RECOVERED).exists()
    # Then Slurm runs what the plan says: q3 cancelled, med preempted (signal, grace,
    # cancel), reclaim running; later waits (QS3 reserves its idle instance).
    portal.ticks_until(
        lambda: (
            set(slurm_states(portal, cluster)) == dispatched(portal) == {"high", "reclaim"}
            and set(slurm_states(portal, cluster).values()) == {"RUNNING"}
        ),
        seconds=GRACE + 60,
        what="Slurm to run what the plan has running",
    )
    assert Job.objects.get(name="q3").status == "FAILED"
    assert Job.objects.get(name="med").preempted_count == 1
    assert Job.objects.get(name="later").status == "RUNNABLE"
    assert max(live_slurm_jobs_per_job(portal).values()) == 1, "no job runs twice"
    assert Job.objects.filter(job_queue=portal.queue).count() == 5, "no job lost"


def test_a_slurm_job_carrying_the_portals_mark_without_a_record_is_cancelled(portal, cluster):
    portal.tick()
    lost = cluster.run(
        "sbatch",
        "--parsable",
        f"--comment=qp:{portal.env.pk}:987654",
        "--gres=gpu:a100:1",
        "-o",
        "/dev/null",
        "--wrap=sleep 600",
    ).strip()
    stranger = cluster.foreign_job(gpus=1)
    portal.ticks_until(lambda: lost not in cluster.jobs(), what="the orphan to be cancelled")
    assert stranger in cluster.jobs(), "a job without the portal's mark is left alone"


def test_a_run_slurmctld_lost_in_a_crash_is_retried_once_never_twice(portal, cluster):
    """slurmctld killed before it saved its state: after its restart Slurm knows no job (it
    stops the run its slurmd still had, and hands the job's id out again). That attempt is
    over, and the job's retry runs as one new Slurm job."""
    sam, _ = services.create_user("sam", teams=["qs1"])
    job = services.submit_job(
        sam,
        job_queue=portal.queue,
        quota_share="QS1",
        capacity_unit="a100",
        name="fragile",
        command="sleep 900",
        retry_attempts=2,
    )
    portal.ticks_until(
        lambda: Job.objects.get(pk=job.pk).status in ("STARTING", "RUNNING"), what="a start"
    )
    cluster.lose_job_state()
    cluster.start_controller()
    portal.ticks_until(
        lambda: job.attempts.count() == 2 and Job.objects.get(pk=job.pk).status == "RUNNING",
        seconds=60,
        what="the retry to run",
    )
    first = job.attempts.get(number=1)
    assert first.stopped_at is not None
    assert "Slurm" in first.status_reason
    assert live_slurm_jobs_per_job(portal) == {"fragile": 1}
    assert len(slurm_states(portal, cluster)) == 1
