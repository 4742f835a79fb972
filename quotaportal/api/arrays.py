"""Job arrays: one submit of many alike jobs (a sweep), read with their children's counts by
status; priority and terminate act on every child not final. Each child is an ordinary job
(`/api/v1/jobs/?array=<id>`), which may be bumped or terminated alone."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api.job_serializers import (
    PriorityUpdateSerializer,
    SubmissionSerializer,
    TerminateSerializer,
    submission,
)
from quotaportal.jobs.arrays import MAX_ARRAY
from quotaportal.quotas import selectors, services
from quotaportal.quotas.models import JobArray


class JobArraySerializer(serializers.ModelSerializer):
    job_queue = serializers.CharField(source="job_queue.name", read_only=True)
    quota_share = serializers.CharField(source="share_name", read_only=True)
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    counts = serializers.SerializerMethodField(
        help_text="Its children by status (every status, 0 included)."
    )

    class Meta:
        model = JobArray
        fields = [
            "id",
            "name",
            "job_queue",
            "quota_share",
            "size",
            "max_running",
            "counts",
            "submitted_by",
            "created_at",
        ]

    def get_counts(self, array) -> dict[str, int]:
        # A list passes its whole page's counts in the context (one read).
        counts = self.context.get("counts") or selectors.array_counts([array.pk])
        return counts[array.pk]


class ArraySubmitSerializer(SubmissionSerializer):
    """A single submit's fields (each child's), and the array's shape."""

    array_size = serializers.IntegerField(
        min_value=1, max_value=MAX_ARRAY, help_text="How many children: name[0] … name[N-1]."
    )
    array_max_running = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="At most this many children RUNNABLE or running at once; the rest PENDING.",
    )

    class Meta(SubmissionSerializer.Meta):
        fields = [*SubmissionSerializer.Meta.fields, "array_size", "array_max_running"]


class JobArrayViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = JobArraySerializer
    http_method_names = ["get", "post", "patch", "head", "options"]
    queryset = JobArray.objects.select_related("job_queue", "submitted_by").order_by(
        "-created_at", "id"
    )

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        context = {
            **self.get_serializer_context(),
            "counts": selectors.array_counts([array.pk for array in page]),
        }
        return self.get_paginated_response(
            self.get_serializer(page, many=True, context=context).data
        )

    @extend_schema(request=ArraySubmitSerializer, responses={201: JobArraySerializer})
    def create(self, request, *args, **kwargs):
        """Submit `array_size` children at once (up to 10,000), each with the fields given."""
        fields = submission(request.data, ArraySubmitSerializer)
        array = services.submit_array(
            request.user,
            size=fields.pop("array_size"),
            max_running=fields.pop("array_max_running", None),
            **fields,
        )
        return Response(self.get_serializer(array).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PriorityUpdateSerializer, responses=JobArraySerializer)
    def partial_update(self, request, *args, **kwargs):
        """Give every child not final this priority."""
        array = self.get_object()
        extra = sorted(set(request.data) - {"scheduling_priority"})
        if extra:
            raise serializers.ValidationError(
                dict.fromkeys(extra, "only scheduling_priority can be changed")
            )
        serializer = PriorityUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.set_array_priority(
            request.user, array, serializer.validated_data["scheduling_priority"]
        )
        return Response(self.get_serializer(array).data)

    @extend_schema(request=TerminateSerializer, responses=JobArraySerializer)
    @action(detail=True, methods=["post"])
    def terminate(self, request, pk=None):
        """End every child not final as FAILED with the reason (running ones are stopped)."""
        array = self.get_object()
        serializer = TerminateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.terminate_array(request.user, array, serializer.validated_data["reason"])
        return Response(self.get_serializer(array).data)
