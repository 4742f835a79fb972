"""REST viewsets: parse with a serializer, call one service or selector, render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api import serializers as s
from quotaportal.awsbatch.sync import drift as aws_drift
from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import AgentToken, GpuHost
from quotaportal.quotas import selectors, services
from quotaportal.quotas.errors import NotFound
from quotaportal.quotas.models import (
    CapacityUnit,
    JobQueue,
    JobStatus,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    Team,
)
from quotaportal.quotas.services import reservations as reservation_services
from quotaportal.quotas.services.resources import AWS_CONNECTION_FIELDS

NAME = r"[^/]+"


class NamedViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Resources looked up by name; creation and deletion go through services."""

    lookup_field = "name"
    lookup_value_regex = NAME
    kind_name = ""

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        obj = self.create_with_service(serializer.validated_data)
        return Response(self.get_serializer(obj).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        services.delete_resource(request.user, self.get_object(), self.kind_name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamViewSet(NamedViewSet):
    queryset = Team.objects.prefetch_related("members").order_by("name")
    serializer_class = s.TeamSerializer
    kind_name = "team"

    def create_with_service(self, data):
        return services.create_team(self.request.user, name=data["name"])


class CapacityUnitViewSet(NamedViewSet):
    queryset = CapacityUnit.objects.order_by("name")
    serializer_class = s.CapacityUnitSerializer
    kind_name = "capacity unit"

    def create_with_service(self, data):
        return services.create_capacity_unit(self.request.user, **data)


class SchedulingPolicyViewSet(NamedViewSet):
    queryset = SchedulingPolicy.objects.order_by("name")
    serializer_class = s.SchedulingPolicySerializer
    kind_name = "scheduling policy"

    def create_with_service(self, data):
        return services.create_scheduling_policy(self.request.user, name=data["name"])


class ServiceEnvironmentViewSet(mixins.UpdateModelMixin, NamedViewSet):
    queryset = (
        ServiceEnvironment.objects.prefetch_related("capacity_limits__capacity_unit")
        .select_related("aws_sync")
        .order_by("name")
    )
    serializer_class = s.ServiceEnvironmentSerializer
    kind_name = "service environment"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def create_with_service(self, data):
        return services.create_service_environment(
            self.request.user,
            name=data["name"],
            backend=data["backend"],
            state=data["state"],
            region=data.get("region", ""),
            endpoint_url=data.get("endpoint_url", ""),
            aws_profile=data.get("aws_profile", ""),
            capacity_limits=s.limits_to_dict(data["capacity_limits"]),
        )

    def update(self, request, *args, **kwargs):
        env = self.get_object()
        serializer = self.get_serializer(env, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        connection = AWS_CONNECTION_FIELDS
        if set(data) - {"capacity_limits", "state", *connection}:
            raise serializers.ValidationError(
                {
                    "detail": "only capacity_limits, state, region, endpoint_url and "
                    "aws_profile can be changed"
                }
            )
        limits = s.limits_to_dict(data["capacity_limits"]) if "capacity_limits" in data else None
        services.update_service_environment(
            request.user,
            env,
            capacity_limits=limits,
            state=data.get("state"),
            **{key: data[key] for key in connection if key in data},
        )
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=s.ReservationSerializer, responses=s.ReservationSerializer)
    @action(detail=True, methods=["get", "post"], url_path="reservations")
    def reservations(self, request, name=None):
        """Reserved capacity for a time window (training plans). GET lists every reservation of
        the environment; POST (admins) adds one: the scheduler sees the capacity at its start,
        and at its end preempts what no longer fits (borrowed capacity first)."""
        env = self.get_object()
        if request.method == "GET":
            rows = env.reservations.select_related("capacity_unit").order_by("starts_at")
            return Response(s.ReservationSerializer(rows, many=True).data)
        serializer = s.ReservationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        created = reservation_services.create_reservation(
            request.user, env, **serializer.validated_data
        )
        return Response(s.ReservationSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: dict})
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"reservations/(?P<reservation>[^/]+)",
        url_name="reservation",
    )
    def cancel_reservation(self, request, name=None, reservation=None):
        """Admins: cancel a reservation. One not started yet is deleted; an active one ends now
        (what no longer fits is preempted at the next tick)."""
        env = self.get_object()
        found = env.reservations.filter(name=reservation).first()
        if found is None:
            raise NotFound(f"environment {env.name} has no reservation named {reservation}")
        outcome = reservation_services.cancel_reservation(request.user, found)
        return Response({"name": reservation, "outcome": outcome})

    @extend_schema(request=s.AgentTokenRequestSerializer, responses={201: dict})
    @action(detail=True, methods=["post"], url_path="agent-token")
    def agent_token(self, request, name=None):
        """Admins: a new agent token for one host of this LOCAL environment (shown once).

        With `host_name` it serves only that host; without, it binds to the first host name
        that registers with it.
        """
        serializer = s.AgentTokenRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token = host_services.create_agent_token(
            request.user, self.get_object(), serializer.validated_data.get("host_name", "")
        )
        return Response({"token": token}, status=status.HTTP_201_CREATED)


class JobQueueViewSet(mixins.UpdateModelMixin, NamedViewSet):
    queryset = JobQueue.objects.select_related("scheduling_policy", "service_environment").order_by(
        "name"
    )
    serializer_class = s.JobQueueSerializer
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


class QuotaShareViewSet(
    mixins.UpdateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.QuotaShareSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        shares = (
            QuotaShare.objects.select_related("job_queue", "team")
            .prefetch_related("capacity_limits__capacity_unit")
            .order_by("job_queue__name", "name")
        )
        if queue := self.request.query_params.get("job_queue"):
            shares = shares.filter(job_queue__name=queue)
        return shares

    def get_serializer_class(self):
        return (
            s.QuotaShareUpdateSerializer
            if self.action == "partial_update"
            else s.QuotaShareSerializer
        )

    @extend_schema(
        parameters=[OpenApiParameter("job_queue", str, description="only this queue's shares")]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data["capacity_limits"] = s.limits_to_dict(data["capacity_limits"])
        share = services.create_share(request.user, **data)
        return Response(self.get_serializer(share).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        share = self.get_object()
        serializer = self.get_serializer(share, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        if "capacity_limits" in changes:
            changes["capacity_limits"] = s.limits_to_dict(changes["capacity_limits"])
        services.update_share(request.user, share, **changes)
        return Response(self.get_serializer(self.get_object()).data)

    def destroy(self, request, *args, **kwargs):
        services.delete_share(request.user, self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(methods=["GET"], responses=s.DriftSerializer)
    @extend_schema(methods=["POST"], request=s.DriftDecisionSerializer, responses=None)
    @action(detail=True, methods=["get", "post"], url_path="aws-drift")
    def aws_drift(self, request, pk=None):
        """AWS_BATCH queues: a share changed in the AWS console is held as drift. GET shows it
        (404 when there is none); POST (admins) keeps the portal's values or adopts AWS's."""
        share = self.get_object()
        if request.method == "POST":
            decision = s.DriftDecisionSerializer(data=request.data)
            decision.is_valid(raise_exception=True)
            aws_drift.resolve_drift(request.user, share, decision.validated_data["decision"])
            return Response(status=status.HTTP_204_NO_CONTENT)
        row = aws_drift.drift_of(share)
        if row is None:
            raise NotFound(f"quota share {share.name} has no unresolved drift")
        differs = [
            {"field": field, "portal": portal, "aws": aws}
            for field, portal, aws in aws_drift.drift_rows(share, row)
        ]
        return Response(
            s.DriftSerializer(
                {"detected_at": row.drift_at, "aws": row.aws, "differs": differs}
            ).data
        )


JOB_FILTERS = [
    OpenApiParameter("job_queue", str),
    OpenApiParameter("quota_share", str),
    OpenApiParameter("status", str),
    OpenApiParameter("mine", bool, description="only my teams' jobs"),
]


class JobViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.JobSerializer
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        jobs = (
            selectors.visible_jobs(self.request.user)
            .select_related("remote")
            .prefetch_related("attempts__host", "attempts__placements__host")
        )
        params = self.request.query_params
        if queue := params.get("job_queue"):
            jobs = jobs.filter(job_queue__name=queue)
        if share := params.get("quota_share"):
            jobs = jobs.filter(share_name=share)
        if job_status := params.get("status"):
            if job_status.upper() not in JobStatus.values:
                raise serializers.ValidationError(
                    {"status": [f"status must be one of {', '.join(JobStatus.values)}"]}
                )
            jobs = jobs.filter(status=job_status.upper())
        if params.get("mine", "").lower() in ("1", "true", "yes"):
            jobs = selectors.jobs_of_user_teams(self.request.user, jobs)
        return jobs.order_by("-created_at", "id")

    @extend_schema(parameters=JOB_FILTERS)
    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "positions": selectors.job_positions(page)}
        return self.get_paginated_response(
            self.get_serializer(page, many=True, context=context).data
        )

    def create(self, request, *args, **kwargs):
        job = services.submit_job(request.user, **s.submission(request.data))
        return Response(
            s.fresh_job(job, self.get_serializer_context()), status=status.HTTP_201_CREATED
        )

    @extend_schema(request=s.BatchSubmitSerializer, responses={201: dict})
    @action(detail=False, methods=["post"])
    def batch(self, request):
        """Submit up to 1,000 jobs in one transaction (a sweep). Each item takes the fields of
        a single submit. If any item is invalid, nothing is submitted and the 400 names each
        failing item's fields (`jobs[3].quantity`). Each item may carry its own client_token,
        so a batch sent again after a lost answer makes no duplicates."""
        envelope = s.BatchSubmitSerializer(data=request.data)
        envelope.is_valid(raise_exception=True)
        items, errors = {}, {}
        for index, raw in enumerate(envelope.validated_data["jobs"]):
            try:
                items[index] = s.submission(raw)
            except serializers.ValidationError as err:
                errors.update({f"jobs[{index}].{k}": v for k, v in err.detail.items()})
        queues = JobQueue.objects.select_related("service_environment").in_bulk(
            {item["job_queue"] for item in items.values()}, field_name="name"
        )
        for index, item in items.items():
            if item["job_queue"] not in queues:
                errors[f"jobs[{index}].job_queue"] = [f"no job queue named {item['job_queue']}"]
            item["job_queue"] = queues.get(item["job_queue"])
        if errors:
            raise serializers.ValidationError(errors)
        items = list(items.values())
        jobs = services.submit_jobs(request.user, items)
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

    @extend_schema(request=s.PriorityUpdateSerializer, responses=s.JobSerializer)
    def partial_update(self, request, *args, **kwargs):
        job = self.get_object()
        extra = sorted(set(request.data) - {"scheduling_priority"})
        if extra:
            raise serializers.ValidationError(
                dict.fromkeys(extra, "only scheduling_priority can be changed")
            )
        serializer = s.PriorityUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.set_priority(request.user, job, serializer.validated_data["scheduling_priority"])
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=s.TerminateSerializer, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def terminate(self, request, pk=None):
        job = self.get_object()
        serializer = s.TerminateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.terminate_job(request.user, job, serializer.validated_data["reason"])
        return Response(self.get_serializer(self.get_object()).data)


class HostSerializer(serializers.ModelSerializer):
    service_environment = serializers.SlugRelatedField(slug_field="name", read_only=True)
    capacity_unit = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = GpuHost
        fields = [
            "name",
            "service_environment",
            "capacity_unit",
            "slots",
            "gpu_indices",
            "state",
            "last_heartbeat",
        ]


class HostStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["READY", "DRAINING"])


class AgentTokenViewSet(viewsets.ReadOnlyModelViewSet):
    """Admins: agent tokens (never the secret itself) and their revocation."""

    serializer_class = s.AgentTokenSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user to check
            return AgentToken.objects.none()
        return host_services.agent_tokens(self.request.user)

    @extend_schema(request=None, responses=s.AgentTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """The token stops working now; its hosts go LOST and their jobs fail over."""
        token = host_services.revoke_agent_token(request.user, self.get_object())
        return Response(self.get_serializer(token).data)


class HostViewSet(mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = GpuHost.objects.select_related("service_environment", "capacity_unit").order_by(
        "name"
    )
    serializer_class = HostSerializer
    lookup_field = "name"
    lookup_value_regex = NAME

    @extend_schema(request=HostStateSerializer, responses=HostSerializer)
    @action(detail=True, methods=["post"], url_path="state")
    def set_state(self, request, name=None):
        """Admins drain a host (no new jobs; running ones finish) or make it READY again."""
        serializer = HostStateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = host_services.set_host_state(
            request.user, self.get_object(), serializer.validated_data["state"]
        )
        return Response(self.get_serializer(host).data)

    @extend_schema(request=None, responses=HostSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request, name=None):
        """Admins: free the host's name for another agent token (the host goes LOST)."""
        host = host_services.release_host(request.user, self.get_object())
        return Response(self.get_serializer(host).data)

    def destroy(self, request, *args, **kwargs):
        """Admins delete a LOST host (409 otherwise)."""
        host_services.delete_host(request.user, self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
