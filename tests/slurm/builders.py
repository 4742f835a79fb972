"""Builders of the SLURM backend's tests: the throwaway Slurm (scripts/slurm_cluster.py), the
portal's side of a test, and what each side runs."""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass

from django.db.models import Count

from quotaportal.quotas.models import Job, JobQueue, ServiceEnvironment
from quotaportal.slurm.models import SlurmJob
from quotaportal.tick.run import run_tick
from tests.builders import REPO

GRACE = 2  # the queue's preemption grace period, seconds


def cluster_module():
    spec = importlib.util.spec_from_file_location(
        "qp_slurm_cluster", REPO / "scripts" / "slurm_cluster.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


slurm_cluster = cluster_module()
Cluster = slurm_cluster.Cluster
GPU_TYPE, GPUS_PER_NODE, NODES = (
    slurm_cluster.GPU_TYPE,
    slurm_cluster.GPUS_PER_NODE,
    slurm_cluster.NODES,
)


@dataclass
class Portal:
    env: ServiceEnvironment
    queue: JobQueue
    admin: object

    def tick(self):
        return run_tick(self.queue.pk)

    def jobs(self) -> str:
        """Each job's status, reason and attempts, with its Slurm jobs: what a timeout shows."""
        runs: dict = {}
        slurm_jobs = SlurmJob.objects.filter(environment=self.env).select_related("attempt")
        for row in slurm_jobs.order_by("submitted_at"):
            ended = " ended" if row.ended_at else ""
            runs.setdefault(row.attempt.job_id, []).append(f"{row.slurm_job_id} {row.state}{ended}")
        jobs = Job.objects.filter(job_queue=self.queue).annotate(tries=Count("attempts"))
        return "\n".join(
            f"  {job.name}: {job.status} ({job.status_reason}); {job.tries} attempts; "
            f"Slurm jobs: {', '.join(runs.get(job.pk, [])) or 'none'}"
            for job in jobs.order_by("created_at")
        )

    def ticks_until(self, done, seconds: float = 30, what: str = "the condition"):
        deadline = time.monotonic() + seconds
        while True:
            self.tick()
            if done():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the jobs:\n{self.jobs()}")
            time.sleep(0.3)


def slurm_states(portal: Portal, cluster) -> dict[str, str]:
    """Portal job name -> its Slurm job's state, for the jobs Slurm runs or holds now."""
    alive = cluster.jobs()
    rows = SlurmJob.objects.filter(environment=portal.env, ended_at__isnull=True).select_related(
        "attempt__job"
    )
    return {
        row.attempt.job.name: alive[row.slurm_job_id] for row in rows if row.slurm_job_id in alive
    }


def dispatched(portal: Portal) -> set[str]:
    """What the plan has running (a victim whose ranks still stop is RUNNABLE to it)."""
    running = ("SCHEDULED", "STARTING", "RUNNING")
    jobs = Job.objects.filter(job_queue=portal.queue, status__in=running)
    return set(jobs.values_list("name", flat=True))
