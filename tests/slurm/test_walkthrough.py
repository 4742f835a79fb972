"""AWS's quota-management walkthrough on a real Slurm: the portal decides every start and
preemption, Slurm places and runs them, and after each step Slurm runs exactly what the plan
has running (a victim only until its grace period ends)."""

from __future__ import annotations

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, Job
from quotaportal.slurm.models import SlurmJob
from tests.slurm.builders import GRACE, dispatched, slurm_states

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "sleep 600"
# A job that checkpoints on SIGTERM: it says so in its output, then exits.
CHECKPOINTS = "trap 'echo \"checkpoint at $(date +%s.%N)\"; exit 0' TERM; sleep 600 & wait"


def submit(user, portal, name, share, priority, command=LONG):
    return services.submit_job(
        user,
        job_queue=portal.queue,
        quota_share=share,
        capacity_unit="a100",
        name=name,
        scheduling_priority=priority,
        command=command,
    )


def status(name: str) -> str:
    return Job.objects.get(name=name).shown_status


def running_in_slurm(portal, cluster) -> set[str]:
    return {name for name, state in slurm_states(portal, cluster).items() if state == "RUNNING"}


def test_the_walkthrough_on_slurm(portal, cluster):
    sam, _ = services.create_user("sam", teams=["qs1"])
    quinn, _ = services.create_user("quinn", teams=["qs2"])
    for name, priority in (("qs1-high", 3), ("qs1-med", 2), ("qs1-low", 1)):
        submit(sam, portal, name, "QS1", priority, CHECKPOINTS)

    # high runs on QS1's instance, med borrows QS2's, low waits (QS3 reserves its own).
    portal.ticks_until(
        lambda: running_in_slurm(portal, cluster) == {"qs1-high", "qs1-med"},
        what="high and med to run in Slurm",
    )
    assert dispatched(portal) == {"qs1-high", "qs1-med"}
    portal.ticks_until(
        lambda: (status("qs1-high"), status("qs1-med")) == ("RUNNING", "RUNNING"),
        what="the portal to see them run",
    )
    low = Job.objects.get(name="qs1-low")
    assert (low.shown_status, low.pending_reason) == ("RUNNABLE", "NOTHING_TO_BORROW")

    # A QS2 job takes its instance back: med gets SIGTERM, then is cancelled, and qs2 runs.
    submit(quinn, portal, "qs2-job", "QS2", 1)
    portal.tick()
    med = Job.objects.get(name="qs1-med")
    assert med.shown_status == "RUNNING"  # its ranks stop within the grace period
    assert med.status_reason.startswith("PREEMPTION_IN_PROGRESS: Cross-share")
    portal.ticks_until(
        lambda: running_in_slurm(portal, cluster) == {"qs1-high", "qs2-job"},
        seconds=GRACE + 30,
        what="the victim to stop and qs2's job to run",
    )
    assert dispatched(portal) == {"qs1-high", "qs2-job"}
    portal.ticks_until(lambda: status("qs1-med") == "RUNNABLE", what="the portal to see it stop")
    med.refresh_from_db()
    assert (med.shown_status, med.preempted_count) == ("RUNNABLE", 1)
    assert med.status_reason.startswith("Preempted: a lender took back")
    assert Event.objects.filter(job=med, kind=EventKind.PREEMPTION_COMPLETED).exists()
    victim = SlurmJob.objects.get(attempt__job=med, attempt__number=1)
    assert victim.signalled_at is not None, "the checkpoint signal went first"
    assert "checkpoint at" in victim.output_tail  # its ranks' trap ran within the grace

    # low raised to 4 preempts high (in-share); low runs as a new Slurm job.
    services.set_priority(sam, Job.objects.get(name="qs1-low"), 4)
    portal.ticks_until(
        lambda: running_in_slurm(portal, cluster) == {"qs1-low", "qs2-job"},
        seconds=GRACE + 30,
        what="high to stop and low to run",
    )
    assert dispatched(portal) == {"qs1-low", "qs2-job"}
    portal.ticks_until(lambda: status("qs1-high") == "RUNNABLE", what="the portal to see it stop")
    high = Job.objects.get(name="qs1-high")
    assert (high.shown_status, high.preempted_count) == ("RUNNABLE", 1)
    # Nothing waits in Slurm: every job it holds is one the plan has running.
    assert set(slurm_states(portal, cluster)) == dispatched(portal)
