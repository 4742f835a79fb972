"""Job queues, with AWS's job-state time limits: serializers and the viewset."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api.common import NamedRef, NamedViewSet, StrictIntegerField
from quotaportal.quotas import selectors, services
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import (
    TIME_LIMIT_REASONS,
    JobQueue,
    Ordering,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
)
from quotaportal.quotas.services import fairness as fair_share
from quotaportal.usage import fairness as usage_fairness
from scheduler.fairshare import Counts


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
    fair_share_half_life_seconds = StrictIntegerField(
        required=False,
        allow_null=True,
        help_text="a fair-share policy: past use halves every this many seconds and borrowers "
        "are ordered by it (lowest first); null: no policy (borrowers by their jobs' age)",
    )
    fair_share_counts = serializers.ChoiceField(
        choices=[c.value for c in Counts],
        required=False,
        help_text="what past use counts: borrowed instance-seconds, or all",
    )

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
            "fair_share_half_life_seconds",
            "fair_share_counts",
        ]


class JobQueueViewSet(mixins.UpdateModelMixin, NamedViewSet):
    queryset = JobQueue.objects.select_related("scheduling_policy", "service_environment").order_by(
        "name"
    )
    serializer_class = JobQueueSerializer
    kind_name = "job queue"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def create_with_service(self, data):
        policy = _fair_share_of(data)
        if policy:
            policy.setdefault("half_life_seconds", None)
            policy.setdefault("counts", Counts.BORROWED.value)
            _check(policy)
        queue = services.create_job_queue(self.request.user, **data)
        if policy:
            queue = usage_fairness.set_policy(self.request.user, queue, **policy)
        return queue

    def update(self, request, *args, **kwargs):
        queue = self.get_object()
        serializer = self.get_serializer(queue, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        policy = _fair_share_of(changes)
        if policy:
            policy.setdefault("half_life_seconds", queue.fair_share_half_life_seconds)
            policy.setdefault("counts", queue.fair_share_counts)
            _check(policy)
        if changes:
            services.update_job_queue(request.user, queue, **changes)
        if policy:
            usage_fairness.set_policy(request.user, queue, **policy)
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def snapshot(self, request, name=None):
        """Front of the queue, head of each share, and per-share utilization per unit."""
        return Response(selectors.queue_snapshot(self.get_object()))


def _fair_share_of(data: dict) -> dict:
    """The fair-share fields taken out of a queue's data, named as the service names them."""
    names = {"fair_share_half_life_seconds": "half_life_seconds", "fair_share_counts": "counts"}
    return {names[field]: data.pop(field) for field in list(data) if field in names}


def _check(policy: dict) -> None:
    """Refused before anything is written (the queue's other changes included)."""
    if errors := fair_share.policy_errors(policy["half_life_seconds"], policy["counts"]):
        raise InvalidInput(errors)
