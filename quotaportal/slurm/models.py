"""A SLURM service environment: how the portal reaches the cluster, what each capacity unit
is in Slurm, the Slurm job of each attempt the portal started, and what the last look at the
cluster found."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from quotaportal.quotas.models.connections import ConnectionHealth


class SlurmCluster(models.Model):
    """How a SLURM environment reaches its cluster, and how its jobs are submitted."""

    environment = models.OneToOneField(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="slurm"
    )
    # Empty: Slurm's commands run on the portal's machine; else ssh to this login node.
    ssh_host = models.CharField(max_length=255, blank=True)
    ssh_user = models.CharField(max_length=64, blank=True)
    ssh_key = models.CharField(max_length=1024, blank=True)  # a path, never the key itself
    slurm_conf = models.CharField(max_length=1024, blank=True)  # SLURM_CONF, if not the default
    # Who a job runs as: empty, the portal's own account; else sbatch --uid with this template
    # ("{username}": the submitter's portal username), after `user_map`'s exceptions.
    run_as = models.CharField(max_length=150, blank=True)
    user_map = models.JSONField(default=dict, blank=True)  # portal username -> cluster account
    work_dir = models.CharField(max_length=1024, default="/tmp")  # the jobs' working folder
    # A job the plan started that Slurm still holds PENDING this long (a foreign job took its
    # place, fragmentation) is cancelled and waits in the portal again.
    pending_timeout_seconds = models.PositiveIntegerField(default=120)
    checkpoint_signal = models.CharField(max_length=16, default="TERM")

    def __str__(self) -> str:
        return f"Slurm of {self.environment}"


class SlurmUnit(models.Model):
    """What one capacity unit is in Slurm: GPUs of a type in a partition (on nodes with these
    features). An instance is one task with gpus_per_unit GPUs."""

    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="units")
    capacity_unit = models.ForeignKey("quotas.CapacityUnit", on_delete=models.PROTECT)
    partition = models.CharField(max_length=128)
    gpu_type = models.CharField(max_length=64, blank=True)  # empty: any GPU
    constraint = models.CharField(max_length=255, blank=True)  # sbatch --constraint

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "capacity_unit"], name="slurm_unit_once"),
        ]


class SlurmJob(models.Model):
    """The Slurm job of one attempt (one per attempt: nothing waits in Slurm). Its stop is
    asked once (`signalled_at`, then `cancelled_at`); `ended_at` once Slurm reports it over."""

    attempt = models.OneToOneField(
        "quotas.JobAttempt", on_delete=models.CASCADE, related_name="slurm"
    )
    environment = models.ForeignKey(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="+"
    )
    slurm_job_id = models.CharField(max_length=32)
    submitted_at = models.DateTimeField()
    state = models.CharField(max_length=24, default="PENDING")  # Slurm's, as last seen
    reason = models.CharField(max_length=255, blank=True)
    node_list = models.CharField(max_length=1024, blank=True)
    output_path = models.CharField(max_length=1024, blank=True)
    output_tail = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    signalled_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            # Among the jobs not over: a slurmctld that lost its last state in a crash, or
            # wrapped around MaxJobId, hands out an id again.
            models.UniqueConstraint(
                fields=["environment", "slurm_job_id"],
                condition=Q(ended_at__isnull=True),
                name="slurm_job_id_once",
            ),
        ]
        indexes = [
            models.Index(
                fields=["environment"], condition=Q(ended_at__isnull=True), name="slurm_job_live"
            ),
        ]


class SlurmState(ConnectionHealth):
    """The cluster as the last look found it (kept for the pages and the planner's capacity,
    which read no command), and how the looks are going."""

    environment = models.OneToOneField(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="slurm_state"
    )
    polled_at = models.DateTimeField(null=True, blank=True)
    capacity = models.JSONField(default=dict, blank=True)  # unit -> instances the portal may use
    nodes = models.JSONField(default=list, blank=True)  # [{name, state, gpus, usable, reason}]
    foreign = models.JSONField(default=list, blank=True)  # [{job_id, user, name, gpus, nodes}]
