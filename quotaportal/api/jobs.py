"""Jobs through REST: submitting (one or a batch), reading, raising a priority, reading
the output, terminating; with the job filters the web pages share (quotaportal.web)."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from quotaportal.api import job_logs
from quotaportal.api.job_serializers import (
    BatchSubmitSerializer,
    JobSerializer,
    PriorityUpdateSerializer,
    TerminateSerializer,
    fresh_job,
    submission,
)
from quotaportal.jobs.filters import JobFilter
from quotaportal.quotas import selectors, services


class JobViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = JobSerializer
    http_method_names = ["get", "post", "patch", "head", "options"]
    filter_backends = [DjangoFilterBackend]
    filterset_class = JobFilter  # the web page's filters too

    def get_queryset(self):
        jobs = (
            selectors.visible_jobs(self.request.user)
            .select_related("remote", "array")
            .prefetch_related("attempts__host", "attempts__placements__host", "attempts__slurm")
        )
        return jobs.order_by("-created_at", "id")

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "positions": selectors.job_positions(page)}
        return self.get_paginated_response(
            self.get_serializer(page, many=True, context=context).data
        )

    def create(self, request, *args, **kwargs):
        job = services.submit_job(request.user, **submission(request.data))
        return Response(
            fresh_job(job, self.get_serializer_context()), status=status.HTTP_201_CREATED
        )

    @extend_schema(request=BatchSubmitSerializer, responses={201: dict})
    @action(detail=False, methods=["post"])
    def batch(self, request):
        """Submit up to 1,000 jobs in one transaction (a sweep). Each item takes the fields of
        a single submit. If any item is invalid, nothing is submitted and the 400 names each
        failing item's fields (`jobs[3].quantity`). Each item may carry its own client_token,
        so a batch sent again after a lost answer makes no duplicates."""
        envelope = BatchSubmitSerializer(data=request.data)
        envelope.is_valid(raise_exception=True)
        items, errors = [], {}
        for index, raw in enumerate(envelope.validated_data["jobs"]):
            try:
                items.append(submission(raw))
            except serializers.ValidationError as err:
                items.append(None)
                errors.update({f"jobs[{index}].{k}": " ".join(v) for k, v in err.detail.items()})
        # The queues go by name: the service finds them and names an unknown one, with every
        # other fault of the other items, beside the faults found here; nothing is created.
        jobs = services.submit_jobs(request.user, items, found=errors)
        return Response(
            {
                "count": len(jobs),
                "jobs": [
                    {
                        "id": str(job.pk),
                        "name": job.name,
                        "status": job.status,
                        "quota_share": job.share_name,
                        "client_token": job.client_token,
                    }
                    for job in jobs
                ],
            },
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=PriorityUpdateSerializer, responses=JobSerializer)
    def partial_update(self, request, *args, **kwargs):
        job = self.get_object()
        extra = sorted(set(request.data) - {"scheduling_priority"})
        if extra:
            raise serializers.ValidationError(
                dict.fromkeys(extra, "only scheduling_priority can be changed")
            )
        serializer = PriorityUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.set_priority(request.user, job, serializer.validated_data["scheduling_priority"])
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        parameters=[job_logs.LogQuerySerializer],
        responses={
            (200, "text/plain"): OpenApiTypes.BINARY,
            (206, "text/plain"): OpenApiTypes.BINARY,
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, job_logs.OutputRenderer])
    def logs(self, request, pk=None):
        """The job's whole output, one rank of one attempt, from a byte offset: up to 1 MiB
        of raw bytes. Headers: X-QP-Next-Offset (where to read on), X-QP-Complete (true once
        nothing will follow), X-QP-Size (stored so far), X-QP-Attempt and X-QP-Ranks. A
        `Range: bytes=N-` header reads the same way and answers 206 with Content-Range.
        Follow a running job by reading again from X-QP-Next-Offset until X-QP-Complete."""
        return job_logs.answer(request, self.get_object())

    @extend_schema(request=TerminateSerializer, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def terminate(self, request, pk=None):
        job = self.get_object()
        serializer = TerminateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.terminate_job(request.user, job, serializer.validated_data["reason"])
        return Response(self.get_serializer(self.get_object()).data)
