"""Hourly usage rows: what the reports sum instead of every attempt."""

from __future__ import annotations

from django.db import models

# The figures a row carries, in instance-seconds unless named otherwise (REST and CSV names).
FIGURES = (
    "instance_seconds",
    "gpu_seconds",
    "own_instance_seconds",
    "borrowed_instance_seconds",
    "preempted_cross_share_instance_seconds",
    "preempted_in_share_instance_seconds",
    "preempted_capacity_instance_seconds",
    "lent_instance_seconds",
    "idle_while_waiting_instance_seconds",
    "waited_beside_idle_instance_seconds",
    "entitled_instance_seconds",
    "runnable_seconds",
    "attempts",
    "jobs",
)


HOUR, DAY, WEEK = 1, 24, 168  # a row's span in hours


class Keyed(models.Model):
    """When (a span of hours from `hour`) and whose: the columns every usage row is keyed by.
    Names, not keys: a report outlives renamed or deleted rows."""

    hour = models.DateTimeField()  # the span's start
    span = models.PositiveSmallIntegerField(default=HOUR)
    job_queue = models.CharField(max_length=128)
    quota_share = models.CharField(max_length=128)
    team = models.CharField(max_length=64)
    user = models.CharField(max_length=150, blank=True)  # "": the share's own row
    unit = models.CharField(max_length=64)

    class Meta:
        abstract = True


class UsageHour(Keyed):
    """One hour of one queue × share × team × user × unit (or, summed from the hours, a UTC day:
    span 24; from the days, an ISO week: span 168). A share's own row (user "") holds what
    belongs to the share rather than to a job: lent, idle while others waited, and its
    entitlement (limit × time)."""

    instance_seconds = models.FloatField(default=0)
    gpu_seconds = models.FloatField(default=0)
    own_instance_seconds = models.FloatField(default=0)
    borrowed_instance_seconds = models.FloatField(default=0)
    preempted_cross_share_instance_seconds = models.FloatField(default=0)
    preempted_in_share_instance_seconds = models.FloatField(default=0)
    preempted_capacity_instance_seconds = models.FloatField(default=0)
    lent_instance_seconds = models.FloatField(default=0)
    idle_while_waiting_instance_seconds = models.FloatField(default=0)
    waited_beside_idle_instance_seconds = models.FloatField(default=0)
    entitled_instance_seconds = models.FloatField(default=0)
    runnable_seconds = models.FloatField(default=0)  # jobs' time RUNNABLE (job-seconds)
    attempts = models.PositiveIntegerField(default=0)
    jobs = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["span", "hour", "job_queue"], name="usage_hour_queue")]
        constraints = [
            models.UniqueConstraint(
                fields=["span", "hour", "job_queue", "quota_share", "team", "user", "unit"],
                name="usage_hour_unique",
            )
        ]


class UsageWait(Keyed):
    """How many jobs that first started in the hour waited about this long (a logarithmic
    bucket of the wait, see reports.WAIT_BUCKET_RATIO): percentiles without every job."""

    hour = models.DateTimeField()
    span = models.PositiveSmallIntegerField(default=HOUR)
    job_queue = models.CharField(max_length=128)
    quota_share = models.CharField(max_length=128)
    team = models.CharField(max_length=64)
    user = models.CharField(max_length=150)
    unit = models.CharField(max_length=64)
    bucket = models.PositiveSmallIntegerField()
    jobs = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["span", "hour", "job_queue"], name="usage_wait_hour_queue")]


class RollupState(models.Model):
    """Up to when the hourly rows are complete (one row): a report counts the rest live."""

    rolled_until = models.DateTimeField(null=True)
    # No attempt ran longer (closed ones; open ones are read whatever their age): how far
    # before a period a roll-up looks for attempts that reach into it.
    longest_attempt_seconds = models.FloatField(default=0)
