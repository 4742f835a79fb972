"""Jobs and their attempts: the service-job lifecycle of docs/concepts.md, Job lifecycle."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from quotaportal.quotas.models.resources import CapacityUnit, JobQueue, QuotaShare
from scheduler.validation import JOB_NUMBERS, MIN_PRIORITY, OPTIONAL_JOB_NUMBERS


class JobStatus(models.TextChoices):
    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    RUNNABLE = "RUNNABLE"
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


DISPATCHED = (JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING)
ACTIVE = (JobStatus.RUNNABLE, *DISPATCHED)
FINAL = (JobStatus.SUCCEEDED, JobStatus.FAILED)


class PendingReason(models.TextChoices):
    WAITING_FOR_CAPACITY = "WAITING_FOR_CAPACITY"
    SHARE_AT_LIMIT = "SHARE_AT_LIMIT"
    BORROW_LIMIT_REACHED = "BORROW_LIMIT_REACHED"
    NOTHING_TO_BORROW = "NOTHING_TO_BORROW"
    EXCEEDS_SHARE_CEILING = "EXCEEDS_SHARE_CEILING"
    BEHIND_SHARE_HEAD = "BEHIND_SHARE_HEAD"
    NO_CAPACITY_LIMIT_FOR_UNIT = "NO_CAPACITY_LIMIT_FOR_UNIT"


# What STRICT ordering says of a share's head alone; every job behind it is BEHIND_SHARE_HEAD
# or, on a unit the share has no limit for, NO_CAPACITY_LIMIT_FOR_UNIT.
HEAD_REASONS = sorted(
    set(PendingReason.values)
    - {PendingReason.BEHIND_SHARE_HEAD, PendingReason.NO_CAPACITY_LIMIT_FOR_UNIT}
)


def shown_status_is(status: str) -> Q:
    """Jobs whose `shown_status` is `status`, as a filter."""
    stopping = Q(status=JobStatus.RUNNABLE, preemption_stopping=True)
    if status == JobStatus.RUNNING:
        return Q(status=JobStatus.RUNNING) | stopping
    if status == JobStatus.RUNNABLE:
        return Q(status=JobStatus.RUNNABLE, preemption_stopping=False)
    return Q(status=status)


class JobArray(models.Model):
    """One submit of many alike jobs (a sweep): its children are Jobs named `name[i]`, each
    knowing its index; at most `max_running` of them RUNNABLE or dispatched at once (the rest
    PENDING until one ends). Priority changes and terminations of the array act on every
    child not final; its status is its children's counts by status."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=128)
    job_queue = models.ForeignKey(JobQueue, on_delete=models.PROTECT, related_name="job_arrays")
    share_name = models.CharField(max_length=128)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="job_arrays"
    )
    size = models.PositiveIntegerField()
    max_running = models.PositiveIntegerField(null=True, blank=True)  # None: no limit
    created_at = models.DateTimeField(default=timezone.now)
    # No child is PENDING any more: a tick need not look at it (jobs.arrays).
    all_released = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(size__gte=1), name="job_array_size_at_least_1"),
            models.CheckConstraint(
                condition=Q(max_running__isnull=True) | Q(max_running__gte=1),
                name="job_array_max_running_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.size} jobs)"


def _within_bounds(field: str, low: int, high: int) -> models.CheckConstraint:
    """The database's copy of a job field's bounds (scheduler.validation.JOB_NUMBERS), so no
    path can write a bad row; a field the job may leave empty may be NULL."""
    within = Q(**{f"{field}__gte": low, f"{field}__lte": high})
    if field in OPTIONAL_JOB_NUMBERS:
        within |= Q(**{f"{field}__isnull": True})
    return models.CheckConstraint(condition=within, name=f"job_{field}_bounds")


class Job(models.Model):
    """A service job: what to run, in which share, how many instances, and where it stands.

    pending_reason is written by the scheduler tick for RUNNABLE jobs (only when it changes);
    positions are computed on read (quotas.selectors) from share order and share ranks.
    scheduled_at is the time of the latest dispatch (victim choice prefers the newest).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=128)
    # No single-column indexes on these two: (job_queue, status) and (quota_share, status)
    # below serve those lookups too, and every job write would maintain them for nothing.
    job_queue = models.ForeignKey(
        JobQueue, on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    quota_share = models.ForeignKey(
        QuotaShare, on_delete=models.SET_NULL, null=True, related_name="jobs", db_index=False
    )
    share_name = models.CharField(max_length=128)  # kept when the share is deleted
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="jobs"
    )
    capacity_unit = models.ForeignKey(CapacityUnit, on_delete=models.PROTECT)
    quantity = models.PositiveIntegerField(default=1)
    scheduling_priority = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.RUNNABLE)
    status_reason = models.TextField(blank=True)
    pending_reason = models.CharField(max_length=32, choices=PendingReason.choices, blank=True)
    command = models.TextField(blank=True)
    service_request_payload = models.JSONField(null=True, blank=True)
    retry_attempts = models.PositiveSmallIntegerField(default=1)
    evaluate_on_exit = models.JSONField(default=list, blank=True)
    preemption_retries_before_termination = models.PositiveIntegerField(null=True, blank=True)
    attempt_duration_seconds = models.PositiveIntegerField(null=True, blank=True)
    simulated_duration_seconds = models.FloatField(null=True, blank=True)
    # NULL, not "", when absent: the per-queue uniqueness applies only to given tokens.
    client_token = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    request_fingerprint = models.CharField(max_length=64, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    preempted_count = models.PositiveIntegerField(default=0)
    recent_preemptions = models.JSONField(default=list, blank=True)
    is_terminated = models.BooleanField(default=False)
    # Preempted on a backend whose ranks wind down (LOCAL, the queue's grace period): RUNNABLE
    # in the table, but the planner leaves it out until its ranks have stopped, and it shows
    # as RUNNING with its PREEMPTION_IN_PROGRESS reason, as AWS keeps a preempted job until it
    # stops (`shown_status`). Cleared when the preemption completes.
    preemption_stopping = models.BooleanField(default=False, db_default=False)
    # When a forward simulation of the queue expects this RUNNABLE job to start (services.
    # estimates); None until one has run, or when it does not start within the horizon.
    estimated_start_at = models.DateTimeField(null=True, blank=True)
    # Its range: the start if jobs run as short as the 10th percentile of their kind, and as
    # long as the 90th with jobs like the last hour's arriving meanwhile (latest: None when it
    # does not start within the horizon then).
    estimated_start_earliest = models.DateTimeField(null=True, blank=True)
    estimated_start_latest = models.DateTimeField(null=True, blank=True)
    # The range is wider than the wait it brackets, or its share has no finished job to go by.
    estimate_uncertain = models.BooleanField(default=False)
    # What it waits for before it may be planned (PENDING until then): [{"job_id", "type"}]
    # with type afterok, afterany or afternotok (scheduler.dependencies).
    depends_on = models.JSONField(default=list, blank=True)
    # A child of a job array, and its index in it (QP_ARRAY_INDEX in its environment).
    # No single-column index: job_array_children (array, status, array_index) serves them.
    array = models.ForeignKey(
        JobArray,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="children",
        db_index=False,
    )
    array_index = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            # A queue's jobs by status, and its waiting jobs by pending reason: a tick reads
            # those no tick has explained yet (new, or back from a preemption, '') and those
            # explained as a share's head (HEAD_REASONS) through it (bridge.heads).
            models.Index(
                fields=["job_queue", "status", "pending_reason"], name="job_queue_status_reason"
            ),
            # A share's jobs by status, its waiting ones in share order: a tick reads the
            # first jobs of each share's line through it (bridge.heads).
            models.Index(
                "quota_share",
                "status",
                models.F("scheduling_priority").desc(),
                "created_at",
                "id",
                name="job_share_line",
            ),
            # A queue's waiting jobs in the order it serves them: a start-time estimate reads
            # the first few thousand through it, however long the queue (bridge.fronts). Its
            # condition names the lowest priority (always true: job_scheduling_priority_bounds)
            # so that only a read saying so may use it: when the tick's reads could, a misjudged
            # plan walked every waiting job through it (a tick's heads read at 1M: 2.2 s, not
            # 0.25).
            models.Index(
                "job_queue",
                models.F("scheduling_priority").desc(),
                "created_at",
                "id",
                condition=Q(status="RUNNABLE", scheduling_priority__gte=MIN_PRIORITY),
                name="job_queue_waiting",
            ),
            # The waiting jobs that hold a start-time estimate: a refresh clears those it no
            # longer estimates without reading the whole queue.
            models.Index(
                fields=["job_queue"],
                condition=Q(status="RUNNABLE", estimated_start_at__isnull=False),
                name="job_estimated",
            ),
            models.Index(fields=["-created_at"], name="job_created"),
            # The LOCAL backend's sweep for preemptions whose completion went unrecorded.
            models.Index(
                fields=["job_queue"],
                condition=Q(preemption_stopping=True),
                name="job_preemption_stopping",
            ),
            # An array's children by status in index order: its counts, and its next PENDING
            # children to release without passing the thousands that already ran.
            models.Index(
                fields=["array", "status", "array_index"],
                condition=Q(array__isnull=False),
                name="job_array_children",
            ),
        ]
        constraints = [
            *(_within_bounds(field, low, high) for field, (low, high) in JOB_NUMBERS.items()),
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="job_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(pending_reason__in=[*PendingReason.values, ""]),
                name="job_pending_reason_valid",
            ),
            models.UniqueConstraint(
                # Per submitter: another team's token must neither collide nor be revealed.
                fields=["job_queue", "submitted_by", "client_token"],
                condition=Q(client_token__isnull=False),
                name="job_client_token_unique_per_user",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def shown_status(self) -> str:
        """The status people and AWS clients see: a preempted job whose ranks still stop is
        RUNNING (its reason says PREEMPTION_IN_PROGRESS) until they have."""
        if self.preemption_stopping and self.status == JobStatus.RUNNABLE:
            return JobStatus.RUNNING
        return self.status

    @property
    def is_final(self) -> bool:
        return self.status in FINAL

    @property
    def is_dispatched(self) -> bool:
        return self.status in DISPATCHED


class JobAttempt(models.Model):
    """One run of a job: where it ran, how it ended, whether it was preempted."""

    # No single-column index: attempt_number_unique (job, number) serves its lookups.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveSmallIntegerField()
    host = models.ForeignKey(
        "hosts.GpuHost", on_delete=models.SET_NULL, null=True, blank=True, related_name="attempts"
    )
    started_at = models.DateTimeField(default=timezone.now)
    stopped_at = models.DateTimeField(null=True, blank=True)
    status_reason = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    preempted = models.BooleanField(default=False)

    class Meta:
        ordering = ["job", "number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="attempt_number_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="attempt_number_positive"),
        ]
        indexes = [
            # The open attempts, a few among every attempt ever made: placing a started job
            # reads which slots they hold, and that must not cost more as history grows.
            models.Index(fields=["id"], condition=Q(stopped_at__isnull=True), name="attempt_open"),
            # The attempts that started in a stretch of time: what a usage roll-up reads (with
            # the open ones), from its hours' start less the longest attempt's duration.
            models.Index(fields=["started_at"], name="attempt_started"),
        ]
