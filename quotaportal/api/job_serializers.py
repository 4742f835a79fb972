"""The job's REST shapes: how a job reads (JobSerializer, with its attempts, placements and
estimate), what a submit may send (SubmissionSerializer) and the small bodies of the job
actions. Shared by the jobs' and the arrays' viewsets (api.jobs, api.arrays).

A submit is checked, and the job it made rendered, by serializers bound once per thread and
reused (`submission`, `fresh_job`): binding a serializer's fields costs more than checking one
submit's values, and a thread serves one request at a time, so each call hands it that
request's data and context and nothing carries over."""

from __future__ import annotations

import threading

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from quotaportal.api.common import NamedRef, no_nul_characters
from quotaportal.jobs.fields import AFTER_KINDS, MAX_COMMAND_BYTES, MAX_TAG_VALUE
from quotaportal.jobs.user_actions import MAX_BATCH
from quotaportal.quotas import selectors, standings
from quotaportal.quotas.models import (
    Backend,
    Job,
    JobAttempt,
    JobQueue,
    JobStatus,
)
from quotaportal.quotas.permissions import can_read_output
from quotaportal.quotas.reasons import SHORT_REASONS
from scheduler.simulate.estimate import ASSUMPTION
from scheduler.validation import value_range


class PlacementSerializer(serializers.Serializer):
    host = serializers.CharField(source="host.name")
    rank = serializers.IntegerField()
    gpu_indices = serializers.ListField(child=serializers.IntegerField())
    exit_code = serializers.IntegerField(allow_null=True)
    output_tail = serializers.CharField(
        allow_null=True, help_text="null unless you are on the job's team or an admin"
    )


class SlurmAttemptSerializer(serializers.Serializer):
    job_id = serializers.CharField(source="slurm_job_id")
    state = serializers.CharField(help_text="Slurm's state of the job, as last seen")
    node_list = serializers.CharField()
    output_path = serializers.CharField(help_text="the job's output file on the cluster")
    exit_code = serializers.IntegerField(allow_null=True)
    output_tail = serializers.CharField(
        allow_null=True, help_text="null unless you are on the job's team or an admin"
    )


class AttemptSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    placements = PlacementSerializer(many=True, read_only=True)
    slurm = serializers.SerializerMethodField(
        help_text="The attempt's Slurm job (SLURM environments); null otherwise."
    )

    @extend_schema_field(SlurmAttemptSerializer(allow_null=True))
    def get_slurm(self, attempt):
        slurm_job = getattr(attempt, "slurm", None)
        return None if slurm_job is None else SlurmAttemptSerializer(slurm_job).data

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
            "slurm",
        ]


class DependencySerializer(serializers.Serializer):
    job_id = serializers.UUIDField(help_text="a job of your teams, submitted before this one")
    type = serializers.ChoiceField(
        choices=AFTER_KINDS,
        default="afterok",
        help_text="afterok: it succeeded; afternotok: it failed; afterany: it ended",
    )


class ArrayRefSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="array_id")
    name = serializers.CharField(source="array.name")
    index = serializers.IntegerField(source="array_index")


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
    "depends_on",
]


JOB_STATE_FIELDS = [
    "id",
    "status",
    "status_reason",
    "pending_reason",
    "waiting_because",
    "fair_share_reason",
    "position_in_share",
    "position_in_queue",
    "estimated_start_at",
    "estimated_start_range",
    "preempted_count",
    "recent_preemptions",
    "attempts",
    "submitted_by",
    "created_at",
    "scheduled_at",
    "started_at",
    "stopped_at",
    "is_terminated",
    "array",
    "aws",
]


class JobSerializer(serializers.ModelSerializer):
    job_queue = NamedRef(queryset=JobQueue.objects.select_related("service_environment"))
    quota_share = serializers.CharField(source="share_name", max_length=128)
    capacity_unit = serializers.CharField(source="capacity_unit.name", max_length=64)
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    scheduling_priority = serializers.IntegerField(**value_range("scheduling_priority"), default=0)
    quantity = serializers.IntegerField(**value_range("quantity"), default=1)
    retry_attempts = serializers.IntegerField(**value_range("retry_attempts"), default=1)
    evaluate_on_exit = EvaluateOnExitSerializer(many=True, required=False)
    preemption_retries_before_termination = serializers.IntegerField(
        **value_range("preemption_retries_before_termination"), required=False, allow_null=True
    )
    attempt_duration_seconds = serializers.IntegerField(
        **value_range("attempt_duration_seconds"), required=False, allow_null=True
    )
    simulated_duration_seconds = serializers.FloatField(
        **value_range("simulated_duration_seconds"), required=False, allow_null=True
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
    depends_on = DependencySerializer(
        many=True,
        required=False,
        help_text=(
            "Jobs this one waits for: it stays PENDING, in no plan, until each has ended as "
            "its type asks, and fails when one ended the other way."
        ),
    )
    waiting_because = serializers.SerializerMethodField(
        help_text=(
            "While it waits, why, in a few words (pending_reason's words while RUNNABLE, what "
            "it waits for while PENDING); null otherwise."
        )
    )
    fair_share_reason = serializers.SerializerMethodField(
        help_text="While it waits to borrow under its queue's fair-share policy, which share "
        "borrows first and why, in a sentence; null otherwise."
    )
    array = serializers.SerializerMethodField(
        help_text="The job array it belongs to ({id, name, index}); null for a single job."
    )
    # As AWS shows it: a preempted job whose ranks still stop is RUNNING (Job.shown_status).
    status = serializers.ChoiceField(
        choices=JobStatus.choices, source="shown_status", read_only=True
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
    estimated_start_range = serializers.SerializerMethodField(
        help_text=(
            "While RUNNABLE and estimated: {earliest, latest, uncertain}: the start if jobs run "
            "as short as the 10th percentile of their kind's recent run times, and as long as "
            "the 90th with jobs like the last hour's arriving meanwhile (latest null when it "
            "does not start within that horizon); uncertain when the range is wider than the "
            "wait or its share has no finished job to go by. Null otherwise."
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
                if attempt.get("slurm"):
                    attempt["slurm"]["output_tail"] = None
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

    def get_fair_share_reason(self, job) -> str | None:
        return standings.waiting_reason(job, self.context.setdefault("fair_share_words", {}))

    def get_waiting_because(self, job) -> str | None:
        if job.status == JobStatus.PENDING:
            return job.status_reason
        if job.shown_status != JobStatus.RUNNABLE:
            return None
        return SHORT_REASONS.get(job.pending_reason, job.pending_reason) or "not planned yet"

    @extend_schema_field(ArrayRefSerializer(allow_null=True))
    def get_array(self, job):
        return None if job.array_id is None else ArrayRefSerializer(job).data

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

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {
                "earliest": {"type": "string", "format": "date-time", "nullable": True},
                "latest": {"type": "string", "format": "date-time", "nullable": True},
                "uncertain": {"type": "boolean"},
            },
        }
    )
    def get_estimated_start_range(self, job):
        if job.status != JobStatus.RUNNABLE or job.estimated_start_at is None:
            return None
        moment = serializers.DateTimeField()
        return {
            "earliest": moment.to_representation(job.estimated_start_earliest)
            if job.estimated_start_earliest
            else None,
            "latest": moment.to_representation(job.estimated_start_latest)
            if job.estimated_start_latest
            else None,
            "uncertain": job.estimate_uncertain,
        }

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_estimated_start_at(self, job):
        if job.status != JobStatus.RUNNABLE or job.estimated_start_at is None:
            return None
        return serializers.DateTimeField().to_representation(job.estimated_start_at)


class SubmissionSerializer(JobSerializer):
    """The fields of one submit, the queue by name: the service looks it up (once per batch,
    and from the lookups cached between requests)."""

    job_queue = serializers.CharField(max_length=128, validators=[no_nul_characters])

    class Meta(JobSerializer.Meta):
        fields = JOB_INPUT_FIELDS
        read_only_fields = []


# One checker per serializer kind and one renderer per thread (the module's docstring: why).
_per_thread = threading.local()


def submission(raw, kind: type[SubmissionSerializer] = SubmissionSerializer) -> dict:
    """One submit's fields, checked by `kind` (ValidationError naming each field otherwise),
    in the form services.submit_job takes, the queue by name."""
    checkers = getattr(_per_thread, "checkers", None)
    if checkers is None:
        checkers = _per_thread.checkers = {}
    if (checker := checkers.get(kind)) is None:
        checker = checkers[kind] = kind()
    data = dict(checker.run_validation(raw))
    data["quota_share"] = data.pop("share_name")
    data["capacity_unit"] = data.pop("capacity_unit")["name"]
    if "depends_on" in data:
        data["depends_on"] = [
            {"job_id": str(d["job_id"]), "type": d["type"]} for d in data["depends_on"]
        ]
    return data


def fresh_job(job: Job, context: dict) -> dict:
    """A job just submitted, as JobSerializer renders it, without asking the database what it
    cannot hold yet: it has no attempts, and its place in the queue comes from the next tick
    (GET the job)."""
    renderer = getattr(_per_thread, "renderer", None)
    if renderer is None:
        renderer = _per_thread.renderer = JobSerializer()
    # A list, not .none(): an empty queryset still compiles its SQL (0.2 ms) to render.
    job._prefetched_objects_cache = {"attempts": []}
    # The fields read the context through their root serializer: this request's, each time.
    renderer._context = {**context, "positions": {job.pk: None}}
    return renderer.to_representation(job)


class BatchSubmitSerializer(serializers.Serializer):
    jobs = serializers.ListField(
        child=serializers.DictField(), min_length=1, max_length=MAX_BATCH, allow_empty=False
    )


class PriorityUpdateSerializer(serializers.Serializer):
    scheduling_priority = serializers.IntegerField(**value_range("scheduling_priority"))


class TerminateSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=1024, default="Terminated by user")
