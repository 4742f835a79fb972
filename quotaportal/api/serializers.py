"""Serializers: shapes and types only. The rules live in quotas.services."""

from __future__ import annotations

import threading

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from quotaportal.quotas import selectors
from quotaportal.quotas.models import (
    TIME_LIMIT_REASONS,
    Backend,
    CapacityUnit,
    Job,
    JobAttempt,
    JobQueue,
    JobStatus,
    Ordering,
    QuotaShare,
    Reservation,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
    Strategy,
    Team,
)
from quotaportal.quotas.permissions import can_read_output
from quotaportal.quotas.services.jobs import MAX_BATCH, MAX_COMMAND_BYTES, MAX_TAG_VALUE
from scheduler.simulate.estimate import ASSUMPTION
from scheduler.validation import MAX_BORROW_LIMIT, MAX_INSTANCES


class NamedRef(serializers.SlugRelatedField):
    """A related object referenced by name, with a clear error for names no row can have."""

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "name")
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or "\x00" in data:
            self.fail("invalid")
        return super().to_internal_value(data)


def no_nul_characters(value) -> None:
    """PostgreSQL's jsonb cannot store NUL; reject it with a 400 instead of failing later."""
    if isinstance(value, str):
        if "\x00" in value:
            raise serializers.ValidationError("text may not contain NUL characters")
    elif isinstance(value, dict):
        for key, item in value.items():
            no_nul_characters(key)
            no_nul_characters(item)
    elif isinstance(value, list):
        for item in value:
            no_nul_characters(item)


class CapacityLimitSerializer(serializers.Serializer):
    capacity_unit = serializers.CharField(max_length=64)
    max_capacity = serializers.IntegerField(min_value=0, max_value=MAX_INSTANCES)


def limits_to_dict(items: list[dict]) -> dict[str, int]:
    names = [item["capacity_unit"] for item in items]
    if len(set(names)) != len(names):
        raise serializers.ValidationError({"capacity_limits": "each capacity unit may appear once"})
    return {item["capacity_unit"]: item["max_capacity"] for item in items}


def limits_to_list(limits) -> list[dict]:
    return [
        {"capacity_unit": lim.capacity_unit.name, "max_capacity": lim.max_capacity}
        for lim in limits.all()
    ]


class TeamSerializer(serializers.ModelSerializer):
    members = serializers.SlugRelatedField(many=True, read_only=True, slug_field="username")

    class Meta:
        model = Team
        fields = ["name", "members"]


class CapacityUnitSerializer(serializers.ModelSerializer):
    class Meta:
        model = CapacityUnit
        fields = ["name", "gpus_per_unit", "description"]


class SchedulingPolicySerializer(serializers.ModelSerializer):
    class Meta:
        model = SchedulingPolicy
        fields = ["name", "idle_resource_assignment_strategy"]


class ServiceEnvironmentSerializer(serializers.ModelSerializer):
    capacity_limits = CapacityLimitSerializer(many=True)
    backend = serializers.ChoiceField(choices=Backend.choices, default=Backend.SIMULATED)
    state = serializers.ChoiceField(choices=State.choices, default=State.ENABLED)

    region = serializers.CharField(max_length=32, required=False, allow_blank=True)
    endpoint_url = serializers.CharField(
        max_length=256,
        required=False,
        allow_blank=True,
        help_text="AWS_BATCH: where boto3 sends its calls; empty for AWS's own endpoint.",
    )
    aws_profile = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        help_text=(
            "AWS_BATCH: a profile of the AWS config files; empty for boto3's default "
            "credential chain (environment, instance role). No secret is ever stored."
        ),
    )
    aws_sync = serializers.SerializerMethodField(
        help_text="AWS_BATCH: last successful sync, last error, failures in a row (else null)."
    )

    class Meta:
        model = ServiceEnvironment
        fields = [
            "name",
            "backend",
            "state",
            "region",
            "endpoint_url",
            "aws_profile",
            "capacity_limits",
            "aws_sync",
        ]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["capacity_limits"] = limits_to_list(instance.capacity_limits)
        return data

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_aws_sync(self, env):
        state = getattr(env, "aws_sync", None) if env.backend == Backend.AWS_BATCH else None
        if state is None:
            return None
        stamp = serializers.DateTimeField().to_representation
        return {
            "last_success_at": stamp(state.last_success_at) if state.last_success_at else None,
            "last_error": state.last_error or None,
            "last_error_at": stamp(state.last_error_at) if state.last_error_at else None,
            "failures_in_a_row": state.failures,
            "calls_last_tick": state.last_calls,
        }


class ReservationSerializer(serializers.ModelSerializer):
    capacity_unit = NamedRef(queryset=CapacityUnit.objects.all())
    instances = serializers.IntegerField(min_value=1, max_value=1_000_000)
    state = serializers.SerializerMethodField()

    class Meta:
        model = Reservation
        fields = [
            "name",
            "capacity_unit",
            "instances",
            "starts_at",
            "ends_at",
            "state",
            "fitted_at",
        ]
        read_only_fields = ["fitted_at"]
        validators = []  # name uniqueness is the service's rule, with its own message

    def get_state(self, reservation) -> str:
        now = timezone.now()
        if reservation.ends_at <= now:
            return "OVER"
        return "ACTIVE" if reservation.starts_at <= now else "UPCOMING"


class TimeLimitActionSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(
        choices=list(TIME_LIMIT_REASONS),
        help_text="acts on a head of its share blocked for this reason (AWS's three)",
    )
    state = serializers.ChoiceField(choices=["RUNNABLE"], default="RUNNABLE")
    max_time_seconds = serializers.IntegerField(min_value=600, max_value=86_400)
    action = serializers.ChoiceField(choices=["TERMINATE"], default="TERMINATE")


class JobQueueSerializer(serializers.ModelSerializer):
    scheduling_policy = NamedRef(queryset=SchedulingPolicy.objects.all())
    service_environment = NamedRef(queryset=ServiceEnvironment.objects.all())
    ordering = serializers.ChoiceField(choices=Ordering.choices, default=Ordering.STRICT)
    state = serializers.ChoiceField(choices=State.choices, default=State.ENABLED)
    priority = serializers.IntegerField(min_value=0, max_value=1000, default=1)
    preemption_grace_seconds = serializers.IntegerField(
        min_value=0, max_value=86_400, required=False
    )
    job_state_time_limit_actions = TimeLimitActionSerializer(many=True, required=False)

    class Meta:
        model = JobQueue
        fields = [
            "name",
            "priority",
            "state",
            "scheduling_policy",
            "service_environment",
            "ordering",
            "preemption_grace_seconds",
            "job_state_time_limit_actions",
        ]


class QuotaShareSerializer(serializers.ModelSerializer):
    job_queue = NamedRef(queryset=JobQueue.objects.all())
    team = NamedRef(queryset=Team.objects.all())
    capacity_limits = CapacityLimitSerializer(many=True)
    sharing_strategy = serializers.ChoiceField(choices=Strategy.choices)
    borrow_limit = serializers.IntegerField(
        min_value=-1, max_value=MAX_BORROW_LIMIT, required=False, allow_null=True
    )
    state = serializers.ChoiceField(choices=State.choices, default=State.ENABLED)

    class Meta:
        model = QuotaShare
        fields = [
            "id",
            "job_queue",
            "name",
            "team",
            "capacity_limits",
            "sharing_strategy",
            "borrow_limit",
            "in_share_preemption",
            "state",
        ]
        read_only_fields = ["id"]
        validators = []  # uniqueness is checked by the service, with a message naming the queue

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["capacity_limits"] = limits_to_list(instance.capacity_limits)
        return data


class QuotaShareUpdateSerializer(QuotaShareSerializer):
    class Meta(QuotaShareSerializer.Meta):
        read_only_fields = ["id", "job_queue", "name"]


class DriftDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(
        choices=["keep", "adopt"],
        help_text="keep: the next sync pushes the portal's values to AWS; adopt: the share "
        "takes AWS's values.",
    )


class DriftSerializer(serializers.Serializer):
    detected_at = serializers.DateTimeField()
    aws = serializers.DictField(help_text="AWS's configuration of the share")
    differs = serializers.ListField(
        child=serializers.DictField(), help_text="[{field, portal, aws}] for each difference"
    )


class PlacementSerializer(serializers.Serializer):
    host = serializers.CharField(source="host.name")
    rank = serializers.IntegerField()
    gpu_indices = serializers.ListField(child=serializers.IntegerField())
    exit_code = serializers.IntegerField(allow_null=True)
    output_tail = serializers.CharField(
        allow_null=True, help_text="null unless you are on the job's team or an admin"
    )


class AttemptSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    placements = PlacementSerializer(many=True, read_only=True)

    class Meta:
        model = JobAttempt
        fields = [
            "number",
            "host",
            "placements",
            "started_at",
            "stopped_at",
            "status_reason",
            "exit_code",
            "preempted",
        ]


class EvaluateOnExitSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["RETRY", "EXIT"])
    on_status_reason = serializers.CharField(max_length=512, required=False)


JOB_INPUT_FIELDS = [
    "name",
    "job_queue",
    "quota_share",
    "capacity_unit",
    "quantity",
    "scheduling_priority",
    "command",
    "service_request_payload",
    "retry_attempts",
    "evaluate_on_exit",
    "preemption_retries_before_termination",
    "attempt_duration_seconds",
    "simulated_duration_seconds",
    "client_token",
    "tags",
]
JOB_STATE_FIELDS = [
    "id",
    "status",
    "status_reason",
    "pending_reason",
    "position_in_share",
    "position_in_queue",
    "estimated_start_at",
    "preempted_count",
    "recent_preemptions",
    "attempts",
    "submitted_by",
    "created_at",
    "scheduled_at",
    "started_at",
    "stopped_at",
    "is_terminated",
    "aws",
]


class JobSerializer(serializers.ModelSerializer):
    job_queue = NamedRef(queryset=JobQueue.objects.select_related("service_environment"))
    quota_share = serializers.CharField(source="share_name", max_length=128)
    capacity_unit = serializers.CharField(source="capacity_unit.name", max_length=64)
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    scheduling_priority = serializers.IntegerField(min_value=0, max_value=9999, default=0)
    quantity = serializers.IntegerField(min_value=1, max_value=100_000, default=1)
    retry_attempts = serializers.IntegerField(min_value=1, max_value=10, default=1)
    evaluate_on_exit = EvaluateOnExitSerializer(many=True, required=False)
    preemption_retries_before_termination = serializers.IntegerField(
        min_value=0, max_value=1_000_000, required=False, allow_null=True
    )
    attempt_duration_seconds = serializers.IntegerField(
        min_value=1, max_value=10_000_000, required=False, allow_null=True
    )
    simulated_duration_seconds = serializers.FloatField(
        min_value=0, max_value=10_000_000, required=False, allow_null=True
    )
    client_token = serializers.CharField(
        min_length=1, max_length=64, required=False, allow_null=True
    )
    tags = serializers.DictField(
        child=serializers.CharField(max_length=MAX_TAG_VALUE, allow_blank=True), required=False
    )
    command = serializers.CharField(
        max_length=MAX_COMMAND_BYTES, required=False, allow_blank=True, trim_whitespace=False
    )
    service_request_payload = serializers.JSONField(
        required=False, allow_null=True, validators=[no_nul_characters]
    )
    attempts = AttemptSerializer(many=True, read_only=True)
    position_in_share = serializers.SerializerMethodField()
    position_in_queue = serializers.SerializerMethodField()
    estimated_start_at = serializers.SerializerMethodField(
        help_text=(
            "While RUNNABLE: when a forward simulation of the queue expects the job to start, "
            f"{ASSUMPTION} (refreshed every few seconds); null when there is none yet or the "
            "job does not start within the simulated horizon."
        )
    )

    aws = serializers.SerializerMethodField(
        help_text=(
            "Jobs of AWS_BATCH environments: AWS's job id (null until pushed), AWS's status, "
            "the place AWS gives it among the queue's first RUNNABLE jobs and whether it heads "
            "its quota share. AWS schedules these jobs: pending_reason is the portal's "
            "prediction from the pulled state. Null for other backends."
        )
    )

    class Meta:
        model = Job
        validators = []  # client_token reuse is idempotency, handled by the service
        fields = [*JOB_INPUT_FIELDS, *JOB_STATE_FIELDS]
        read_only_fields = JOB_STATE_FIELDS

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is not None and not can_read_output(request.user, instance):
            for attempt in data.get("attempts", []):
                for placement in attempt["placements"]:
                    placement["output_tail"] = None
        return data

    def _position(self, job, index: int) -> int | None:
        # Lists pass the whole page's positions in the context (three queries in all).
        positions = self.context.setdefault("positions", {})
        if job.pk not in positions:
            positions[job.pk] = selectors.job_positions([job]).get(job.pk)
        found = positions[job.pk]
        return found[index] if found else None

    def get_position_in_share(self, job) -> int | None:
        return self._position(job, 0)

    def get_position_in_queue(self, job) -> int | None:
        return self._position(job, 1)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_aws(self, job):
        if job.job_queue.service_environment.backend != Backend.AWS_BATCH:
            return None
        remote = getattr(job, "remote", None)
        return {
            "job_id": remote.aws_job_id if remote else None,
            "status": remote.aws_status if remote else None,
            "queue_position": remote.queue_position if remote else None,
            "heads_its_share": remote.share_head if remote else False,
            "pending_reason_is_predicted": True,
        }

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_estimated_start_at(self, job):
        if job.status != JobStatus.RUNNABLE or job.estimated_start_at is None:
            return None
        return serializers.DateTimeField().to_representation(job.estimated_start_at)


class SubmissionSerializer(JobSerializer):
    """The fields of one submit, the queue by name: the service looks it up (once per batch,
    and from the lookups kept between requests)."""

    job_queue = serializers.CharField(max_length=128, validators=[no_nul_characters])

    class Meta(JobSerializer.Meta):
        fields = JOB_INPUT_FIELDS
        read_only_fields = []


# Building a serializer's fields costs more than checking a submit or rendering a job with
# them (a deep copy of every declared field), so each thread keeps one of each and reuses it.
_per_thread = threading.local()


def submission(raw) -> dict:
    """One submit's fields, checked (ValidationError naming each field otherwise), in the form
    services.submit_job takes, the queue by name."""
    checker = getattr(_per_thread, "checker", None)
    if checker is None:
        checker = _per_thread.checker = SubmissionSerializer()
    data = dict(checker.run_validation(raw))
    data["quota_share"] = data.pop("share_name")
    data["capacity_unit"] = data.pop("capacity_unit")["name"]
    return data


def fresh_job(job: Job, context: dict) -> dict:
    """A job just submitted, as JobSerializer renders it, without asking the database what it
    cannot hold yet: it has no attempts, and its place in the queue comes from the next tick
    (GET the job)."""
    renderer = getattr(_per_thread, "renderer", None)
    if renderer is None:
        renderer = _per_thread.renderer = JobSerializer()
    job._prefetched_objects_cache = {"attempts": JobAttempt.objects.none()}
    # The fields read the context through their root serializer: this request's, each time.
    renderer._context = {**context, "positions": {job.pk: None}}
    return renderer.to_representation(job)


class BatchSubmitSerializer(serializers.Serializer):
    jobs = serializers.ListField(
        child=serializers.DictField(), min_length=1, max_length=MAX_BATCH, allow_empty=False
    )


class AgentTokenRequestSerializer(serializers.Serializer):
    host_name = serializers.CharField(max_length=128, required=False, allow_blank=True)


class AgentTokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    service_environment = serializers.CharField(source="environment.name")
    prefix = serializers.CharField(help_text="the token's first characters, to tell it apart")
    host_name = serializers.CharField(help_text="the host it speaks for; empty until it binds")
    hosts = serializers.ListField(
        child=serializers.CharField(), source="host_names", read_only=True
    )
    created_at = serializers.DateTimeField()
    revoked = serializers.BooleanField()
    revoked_at = serializers.DateTimeField(allow_null=True)


class PriorityUpdateSerializer(serializers.Serializer):
    scheduling_priority = serializers.IntegerField(min_value=0, max_value=9999)


class TerminateSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=1024, default="Terminated by user")
