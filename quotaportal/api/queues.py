"""Job queues, with AWS's job-state time limits: serializers and the viewset."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api.common import NamedRef, NamedViewSet
from quotaportal.quotas import selectors, services
from quotaportal.quotas.models import (
    TIME_LIMIT_REASONS,
    JobQueue,
    Ordering,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
)


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


class JobQueueViewSet(mixins.UpdateModelMixin, NamedViewSet):
    queryset = JobQueue.objects.select_related("scheduling_policy", "service_environment").order_by(
        "name"
    )
    serializer_class = JobQueueSerializer
    kind_name = "job queue"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def create_with_service(self, data):
        return services.create_job_queue(self.request.user, **data)

    def update(self, request, *args, **kwargs):
        queue = self.get_object()
        serializer = self.get_serializer(queue, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        services.update_job_queue(request.user, queue, **serializer.validated_data)
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def snapshot(self, request, name=None):
        """Front of the queue, head of each share, and per-share utilization per unit."""
        return Response(selectors.queue_snapshot(self.get_object()))
