"""Teams, capacity, and the AWS Batch quota-management resources an admin defines."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class State(models.TextChoices):
    ENABLED = "ENABLED"
    DISABLED = "DISABLED"


class Team(models.Model):
    """A group of scientists; quota shares belong to teams, members submit to them."""

    name = models.SlugField(max_length=64, unique=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's place in a team; team admins may act on every job of the team."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    is_admin = models.BooleanField(default=False)
    # Set from the identity provider's group claims at each sign-in (identity.claims): the
    # console shows it and leaves it alone; the provider's groups are where it changes.
    from_provider = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_unique")]


class CapacityUnit(models.Model):
    """What capacity is counted in: an instance type (ml.g5.xlarge) or a GPU model (a100-80g)."""

    name = models.CharField(max_length=64, unique=True)
    gpus_per_unit = models.PositiveSmallIntegerField(default=1)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(gpus_per_unit__gte=1), name="unit_gpus_at_least_1"),
        ]

    def __str__(self) -> str:
        return self.name


class Backend(models.TextChoices):
    LOCAL = "LOCAL"
    AWS_BATCH = "AWS_BATCH"
    SIMULATED = "SIMULATED"
    SLURM = "SLURM"


class ServiceEnvironment(models.Model):
    """Where jobs run: local GPU hosts, a Slurm cluster, AWS Batch, or a simulation; its
    capacity per unit."""

    name = models.CharField(max_length=128, unique=True)
    backend = models.CharField(max_length=16, choices=Backend.choices, default=Backend.SIMULATED)
    state = models.CharField(max_length=8, choices=State.choices, default=State.ENABLED)
    region = models.CharField(max_length=32, blank=True)
    arn = models.CharField(max_length=256, blank=True)
    # AWS_BATCH only: where boto3 sends its calls (blank: AWS's own endpoint for the region)
    # and which named profile of the standard credential chain it uses (blank: the default
    # chain: environment, config files, instance role). No secret is ever stored here.
    endpoint_url = models.CharField(max_length=256, blank=True)
    aws_profile = models.CharField(max_length=64, blank=True)
    tags = models.JSONField(default=dict, blank=True)  # AWS resource tags

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(backend__in=Backend.values), name="env_backend_valid"
            ),
            models.CheckConstraint(condition=Q(state__in=State.values), name="env_state_valid"),
        ]

    def __str__(self) -> str:
        return self.name


# The reasons AWS's jobStateTimeLimitActions take: an action terminates only a head blocked for
# its reason (jobs.time_limits.blocked_for says which a head is blocked for).
INSUFFICIENT_CAPACITY = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
ENVIRONMENT_TOO_SMALL = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
QUOTA_LIMIT_EXCEEDED = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
TIME_LIMIT_REASONS = (INSUFFICIENT_CAPACITY, ENVIRONMENT_TOO_SMALL, QUOTA_LIMIT_EXCEEDED)


class EnvironmentCapacity(models.Model):
    """max_capacity of one unit in a service environment (AWS capacityLimits)."""

    environment = models.ForeignKey(
        ServiceEnvironment, on_delete=models.CASCADE, related_name="capacity_limits"
    )
    capacity_unit = models.ForeignKey(CapacityUnit, on_delete=models.PROTECT)
    max_capacity = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["environment", "capacity_unit"], name="env_unit_unique"
            ),
            models.CheckConstraint(
                condition=Q(max_capacity__gte=0), name="env_capacity_not_negative"
            ),
        ]


class Reservation(models.Model):
    """Reserved capacity for a time window (a SageMaker training plan): `instances` more of a
    unit in the environment from starts_at to ends_at. When it ends, the first tick preempts
    what no longer fits (see scheduler.reservations) and stamps fitted_at."""

    environment = models.ForeignKey(
        ServiceEnvironment, on_delete=models.CASCADE, related_name="reservations"
    )
    name = models.CharField(max_length=128)
    capacity_unit = models.ForeignKey(CapacityUnit, on_delete=models.PROTECT)
    instances = models.PositiveIntegerField()
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    fitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["starts_at", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["environment", "name"], name="reservation_name_unique_in_env"
            ),
            models.CheckConstraint(
                condition=Q(instances__gte=1), name="reservation_instances_at_least_1"
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="reservation_ends_after_start"
            ),
        ]
        indexes = [models.Index(fields=["environment", "ends_at"], name="reservation_env_end")]

    def __str__(self) -> str:
        return f"{self.environment.name}/{self.name}"


class SchedulingPolicy(models.Model):
    """AWS quotaSharePolicy; FIFO is the only idle-resource assignment strategy AWS has."""

    class IdleStrategy(models.TextChoices):
        FIFO = "FIFO"

    name = models.CharField(max_length=128, unique=True)
    idle_resource_assignment_strategy = models.CharField(
        max_length=8, choices=IdleStrategy.choices, default=IdleStrategy.FIFO
    )
    tags = models.JSONField(default=dict, blank=True)  # AWS resource tags

    class Meta:
        verbose_name_plural = "scheduling policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(idle_resource_assignment_strategy__in=["FIFO"]), name="policy_fifo_only"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Ordering(models.TextChoices):
    STRICT = "STRICT"
    BEST_EFFORT = "BEST_EFFORT"


class JobQueue(models.Model):
    """A queue of jobs on one service environment, divided into quota shares."""

    name = models.CharField(max_length=128, unique=True)
    priority = models.PositiveSmallIntegerField(default=1)
    state = models.CharField(max_length=8, choices=State.choices, default=State.ENABLED)
    scheduling_policy = models.ForeignKey(SchedulingPolicy, on_delete=models.PROTECT)
    service_environment = models.ForeignKey(
        ServiceEnvironment, on_delete=models.PROTECT, related_name="job_queues"
    )
    ordering = models.CharField(max_length=12, choices=Ordering.choices, default=Ordering.STRICT)
    preemption_grace_seconds = models.PositiveIntegerField(default=30)
    # AWS's jobStateTimeLimitActions: [{"reason", "state": "RUNNABLE", "max_time_seconds",
    # "action": "TERMINATE"}]; a job heading its share longer than that is terminated.
    job_state_time_limit_actions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    tags = models.JSONField(default=dict, blank=True)  # AWS resource tags
    # Fair share over time (scheduler.fairshare): borrowing ordered by each share's decayed
    # past use over its weight. Off while the half-life is None.
    fair_share_half_life_seconds = models.PositiveIntegerField(null=True, blank=True)
    fair_share_counts = models.CharField(
        max_length=8,
        choices=[("borrowed", "borrowed use"), ("all", "all use")],
        default="borrowed",
    )
    # Every service that changes what the planner sees bumps state_version, as does a tick
    # that starts or preempts: a tick compares it with the version its last settled plan saw
    # (TickMemo, the ticks' own memo of the queue).
    state_version = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(priority__lte=1000), name="queue_priority_range"),
            models.CheckConstraint(condition=Q(state__in=State.values), name="queue_state_valid"),
            models.CheckConstraint(
                condition=Q(ordering__in=Ordering.values), name="queue_ordering_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Strategy(models.TextChoices):
    RESERVE = "RESERVE"
    LEND = "LEND"
    LEND_AND_BORROW = "LEND_AND_BORROW"


class QuotaShare(models.Model):
    """A virtual queue inside a job queue with its own capacity limits (AWS quota share)."""

    # No single-column index: share_name_unique_in_queue (job_queue, name) serves its lookups.
    job_queue = models.ForeignKey(
        JobQueue, on_delete=models.CASCADE, related_name="quota_shares", db_index=False
    )
    name = models.CharField(max_length=128)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="quota_shares")
    sharing_strategy = models.CharField(max_length=16, choices=Strategy.choices)
    borrow_limit = models.IntegerField(default=-1)
    in_share_preemption = models.BooleanField(default=False)
    # Under its queue's fair-share policy: past use counts divided by this.
    fair_share_weight = models.FloatField(default=1.0)
    state = models.CharField(max_length=8, choices=State.choices, default=State.ENABLED)
    created_at = models.DateTimeField(auto_now_add=True)
    tags = models.JSONField(default=dict, blank=True)  # AWS resource tags
    # Where the last tick ranked this share among those with RUNNABLE jobs (0 = served first);
    # None when it has none. Positions in the queue are derived from it on read.
    queue_rank = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job_queue", "name"], name="share_name_unique_in_queue"
            ),
            models.CheckConstraint(
                condition=Q(borrow_limit__gte=-1), name="share_borrow_limit_min"
            ),
            models.CheckConstraint(
                condition=Q(fair_share_weight__gt=0), name="share_fair_weight_positive"
            ),
            models.CheckConstraint(
                condition=Q(sharing_strategy="LEND_AND_BORROW") | Q(borrow_limit=-1),
                name="share_borrow_limit_only_for_lend_and_borrow",
            ),
            models.CheckConstraint(
                condition=Q(sharing_strategy__in=Strategy.values), name="share_strategy_valid"
            ),
            models.CheckConstraint(condition=Q(state__in=State.values), name="share_state_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.job_queue.name}/{self.name}"


class ShareCapacityLimit(models.Model):
    """maxCapacity of one unit in a quota share."""

    share = models.ForeignKey(QuotaShare, on_delete=models.CASCADE, related_name="capacity_limits")
    capacity_unit = models.ForeignKey(CapacityUnit, on_delete=models.PROTECT)
    max_capacity = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["share", "capacity_unit"], name="share_unit_unique"),
            models.CheckConstraint(
                condition=Q(max_capacity__gte=1), name="share_capacity_at_least_1"
            ),
        ]
