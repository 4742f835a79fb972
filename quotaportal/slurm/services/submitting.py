"""Starting what a plan started: one sbatch per attempt, as the plan ordered them.

A job handed to Slurm is STARTING until a look sees it RUNNING. Slurm unreachable mid-way:
this job and the rest of the plan's wait in the portal again (their attempts undone), and the
environment is marked failing, so the next ticks start nothing until a look succeeds. Slurm
refusing one job (an unknown partition, an account it does not know) fails that job with
Slurm's message: trying again would be refused again.
"""

from __future__ import annotations

from django.db import transaction

from quotaportal.jobs.transitions import mark_starting, return_unplaced
from quotaportal.quotas.models import EventKind, Job, JobAttempt
from quotaportal.quotas.services.connections import record_outcome
from quotaportal.quotas.services.remote import reject_unpushed
from quotaportal.slurm import cli
from quotaportal.slurm.models import SlurmCluster, SlurmJob, SlurmState
from quotaportal.slurm.requests import account_for, batch_script, sbatch_options
from quotaportal.slurm.services.watching import Calls, access_of, stop_what_ended

WAITING_AGAIN = "Slurm could not be reached to start it; it waits in the portal"


def launch(queue, job_ids: list[str], now) -> list[str]:
    """Submit the plan's started jobs (and stop its victims); the jobs not submitted."""
    env = queue.service_environment
    cluster = SlurmCluster.objects.filter(environment=env).prefetch_related("units").first()
    attempts = {
        str(a.job_id): a
        for a in JobAttempt.objects.filter(
            job_id__in=job_ids, stopped_at__isnull=True
        ).select_related("job__capacity_unit", "job__submitted_by", "job__job_queue")
    }
    submitted, refused, unreached = {}, {}, []
    calls = Calls()
    for job_id in job_ids:
        attempt = attempts.get(job_id)
        if attempt is None:
            continue
        if cluster is None or unreached:
            unreached.append(job_id)
            continue
        try:
            calls.count += 1
            submitted[job_id] = _submit(cluster, attempt)
        except cli.Unavailable as err:
            unreached.append(job_id)
            _failing(queue, now, calls, err.message)
        except cli.Refused as err:
            refused[job_id] = err.message
    _record(env, attempts, submitted, now)
    _undo(unreached, refused, now)
    if cluster is not None and not unreached:
        stop_what_ended(cluster, now, calls)
    return unreached + list(refused)


def _submit(cluster: SlurmCluster, attempt: JobAttempt) -> str:
    job = attempt.job
    unit = next(
        (u for u in cluster.units.all() if u.capacity_unit_id == job.capacity_unit_id), None
    )
    if unit is None:
        raise cli.Refused(
            f"capacity unit {job.capacity_unit.name} has no Slurm partition in this "
            "environment (set it on the environment's page)"
        )
    username = job.submitted_by.username if job.submitted_by else ""
    options = sbatch_options(
        env_id=cluster.environment_id,
        attempt_id=attempt.pk,
        name=job.name,
        quantity=job.quantity,
        gpus_per_unit=job.capacity_unit.gpus_per_unit,
        partition=unit.partition,
        gpu_type=unit.gpu_type,
        constraint=unit.constraint,
        account=account_for(cluster.run_as, cluster.user_map, username),
        work_dir=cluster.work_dir,
        time_limit_seconds=_time_limit(job),
    )
    script = batch_script(
        job_id=str(job.pk),
        job_name=job.name,
        attempt=attempt.number,
        command=job.command,
        array_index=job.array_index,
    )
    return cli.submit(access_of(cluster), options, script)


def _time_limit(job) -> int | None:
    """Slurm's own limit: the attempt's duration and the queue's grace to stop."""
    if not job.attempt_duration_seconds:
        return None
    return job.attempt_duration_seconds + job.job_queue.preemption_grace_seconds


def _record(env, attempts: dict, submitted: dict[str, str], now) -> None:
    if not submitted:
        return
    SlurmJob.objects.bulk_create(
        SlurmJob(
            attempt=attempts[job_id],
            environment=env,
            slurm_job_id=slurm_id,
            submitted_at=now,
        )
        for job_id, slurm_id in submitted.items()
    )
    mark_starting(list(submitted))


def _undo(unreached: list[str], refused: dict[str, str], now) -> None:
    if unreached:
        return_unplaced(unreached, WAITING_AGAIN)
    for job_id, message in refused.items():
        return_unplaced([job_id])
        reject_unpushed(Job.objects.get(pk=job_id), f"Slurm refused the job: {message}"[:1024], now)


def _failing(queue, now, calls: Calls, message: str) -> None:
    """Slurm stopped answering mid-launch: the environment is failing from now on (so no
    tick starts anything until a look succeeds), in a savepoint of its own."""
    with transaction.atomic():
        state, _ = SlurmState.objects.get_or_create(environment=queue.service_environment)
        kinds = (EventKind.SLURM_UNAVAILABLE, EventKind.SLURM_RECOVERED)
        record_outcome(state, now=now, calls=calls.count, error=message, queue=queue, kinds=kinds)
