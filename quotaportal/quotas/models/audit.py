"""The audit log and the record of scheduler ticks."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from quotaportal.quotas.models.jobs import Job
from quotaportal.quotas.models.resources import JobQueue, QuotaShare


class EventKind(models.TextChoices):
    SUBMITTED = "submitted"
    # A PENDING job's dependencies were met (or its array had a place): RUNNABLE from then.
    RELEASED = "released"
    DISPATCHED = "dispatched"
    STARTING = "starting"  # handed to the host that launches it (LOCAL)
    STARTED = "started"
    PREEMPTED_CROSS_SHARE = "preempted_cross_share"
    PREEMPTED_IN_SHARE = "preempted_in_share"
    PREEMPTED_CAPACITY = "preempted_capacity"
    # The preempted attempt has stopped (a LOCAL job's last rank exited): AWS's "Preemption
    # Completed". The preempted_* kinds above are its "Preemption Started" (and its completion
    # too when their detail says `stopped`: the attempt stopped with the preemption).
    PREEMPTION_COMPLETED = "preemption_completed"
    PRIORITY_CHANGED = "priority_changed"
    RETRIED = "retried"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TERMINATED = "terminated"
    SHARE_CREATED = "share_created"
    SHARE_CHANGED = "share_changed"
    SHARE_DELETED = "share_deleted"
    RESOURCE_CHANGED = "resource_changed"
    # AWS_BATCH environments: what the sync pushed, its failures and recoveries, drift.
    AWS_PUSHED = "aws_pushed"
    AWS_SYNC_FAILED = "aws_sync_failed"
    AWS_SYNC_RECOVERED = "aws_sync_recovered"
    AWS_DRIFT = "aws_drift"
    AWS_DRIFT_RESOLVED = "aws_drift_resolved"
    AWS_IMPORTED = "aws_imported"
    # SLURM environments: the cluster could not be reached, and was again.
    SLURM_UNAVAILABLE = "slurm_unavailable"
    SLURM_RECOVERED = "slurm_recovered"
    # Who signed in and out, how (password or the identity provider), and refused sign-ins.
    SIGNED_IN = "signed_in"
    SIGNED_OUT = "signed_out"
    SIGN_IN_REFUSED = "sign_in_refused"


class Event(models.Model):
    """Who did what, when: every state change writes one (the audit log)."""

    time = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    actor_name = models.CharField(max_length=150)  # "system" for the scheduler
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, null=True, blank=True, related_name="events"
    )
    share = models.ForeignKey(QuotaShare, on_delete=models.SET_NULL, null=True, blank=True)
    # No single-column index: event_queue_id (job_queue, id) below serves its lookups, and a
    # tick that starts a thousand jobs writes a thousand events.
    # A deleted queue's events are kept, naming it in their detail (services.resources).
    job_queue = models.ForeignKey(
        JobQueue, on_delete=models.SET_NULL, null=True, blank=True, db_index=False
    )
    detail = models.JSONField(default=dict, blank=True)
    # The outbox: written with the change, in its transaction; set once the notifications
    # it makes (webhook and e-mail deliveries) are stored. A database default, so the
    # tick's own INSERTs need not name it.
    published = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [
            # The dashboard asks "anything new in this queue?" by its latest event id.
            models.Index(fields=["job_queue", "id"], name="event_queue_id"),
            # What is left to publish: a few rows among every event ever written.
            models.Index(
                fields=["id"], condition=models.Q(published=False), name="event_unpublished"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=EventKind.values), name="event_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.kind}"


class SchedulerRun(models.Model):
    """One tick of one job queue: how long it took and what it changed."""

    job_queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="scheduler_runs")
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    duration_ms = models.FloatField(default=0)
    dispatched = models.PositiveIntegerField(default=0)
    preempted = models.PositiveIntegerField(default=0)
    skipped = models.BooleanField(default=False)  # another tick of this queue held the lock
    replanned = models.BooleanField(default=True)  # False: nothing changed since the last plan
    error = models.TextField(blank=True)
    backend_calls = models.PositiveIntegerField(default=0)  # AWS_BATCH: API calls this tick

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(duration_ms__gte=0), name="run_duration_not_negative"
            ),
        ]


# Upper bounds (seconds) of the tick-duration histogram's buckets, as Prometheus writes them.
TICK_BUCKETS = ("0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10")
TICK_SKIPPED = "skipped"  # a tick that found another holding its environment's lock


class TickStat(models.Model):
    """Cumulative tick counts per queue and duration bucket (one row per bucket, "+Inf" and
    "skipped" included), so /metrics serves counters that never go back when scheduler runs
    are pruned. Each tick adds one to one row."""

    job_queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="tick_stats")
    bucket = models.CharField(max_length=8)
    count = models.BigIntegerField(default=0)
    seconds = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job_queue", "bucket"], name="tick_stat_unique"),
        ]


class UtilizationSample(models.Model):
    """Instances in use per share and unit at a moment, for the dashboard's history chart.

    The tick writes one when usage changed since the last sample or a minute has passed.
    """

    job_queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="samples")
    time = models.DateTimeField(default=timezone.now)
    used = models.JSONField(default=dict)  # {share name: {unit: instances}}

    class Meta:
        ordering = ["time"]
        indexes = [models.Index(fields=["job_queue", "time"], name="sample_queue_time")]
